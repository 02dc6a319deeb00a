#!/usr/bin/env python3
"""Runs tinygrad's own tests on tinygrad_rs: 0.14.0's test/test_tiny.py and 0.12.0's test/test_ops.py (the last
release that ships it; each op's forward and gradients against torch). The source distributions are downloaded once
into a cache (never committed), `from tinygrad` becomes `from tinygrad_rs`, and pytest runs each file. Every test
that does not pass (fails, errors or skips) must be listed in expected_failures.txt with its reason; the run fails on
a new one or on a listed test that now passes. Prints pytest's closing line per file.

usage: python run_tinygrad_tests.py [--cache DIR] [--only test_tiny.py] [--write-expected]
"""
import argparse, os, re, subprocess, sys, tarfile, xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITES = [("0.14.0", "test_tiny.py"), ("0.12.0", "test_ops.py")]
EXPECTED = HERE / "expected_failures.txt"

def fetch(cache: Path, version: str, name: str) -> Path:
  """The test file `name` of tinygrad `version`'s sdist, imports rewritten, under `cache`."""
  sdist = cache / f"tinygrad-{version}.tar.gz"
  if not sdist.exists():
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", f"tinygrad=={version}", "-d", str(cache)],
                   check=True)
  with tarfile.open(sdist) as tf: src = tf.extractfile(f"tinygrad-{version}/test/{name}").read().decode()
  out = cache / f"work-{version}" / name
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(re.sub(r"\b(from|import) tinygrad\b", r"\1 tinygrad_rs", src))
  return out

def run(path: Path) -> tuple[dict[str, tuple[str, str]], str]:
  """Each test's (outcome, message) by `file::Class::test`, and pytest's closing line."""
  xml = path.with_suffix(".xml")
  env = {**os.environ, "CI": "1"}
  p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", f"--junitxml={xml}", path.name],
                     cwd=path.parent, env=env, capture_output=True, text=True)
  closing = next((l for l in reversed(p.stdout.splitlines()) if re.search(r"\d+ (passed|failed)", l)), p.stdout[-300:] + p.stderr[-300:])
  results = {}
  for case in ET.parse(xml).getroot().iter("testcase"):
    tid = f"{path.name}::{case.get('classname').split('.')[-1]}::{case.get('name')}"
    kids = [k for k in case if k.tag in ("failure", "error", "skipped")]
    outcome = kids[0].tag if kids else "passed"
    msg = (kids[0].get("message") or "").splitlines()[0][:160] if kids and kids[0].get("message") else ""
    results[tid] = (outcome, msg)
  return results, closing.strip("= ")

def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--cache", default=os.environ.get("TINYGRAD_PY_SUITE", str(Path.home() / ".cache/tinygrad/py-suite")))
  ap.add_argument("--only", help="run one file (test_tiny.py or test_ops.py)")
  ap.add_argument("--write-expected", action="store_true", help="write the tests not passed to expected_failures.txt")
  args = ap.parse_args()
  expected = {}
  for line in EXPECTED.read_text().splitlines() if EXPECTED.exists() else []:
    if line.strip() and not line.startswith("#"):
      tid, _, reason = line.partition("  ")
      expected[tid.strip()] = reason.strip()
  bad, listed = [], []
  for version, name in SUITES:
    if args.only and args.only != name: continue
    results, closing = run(fetch(Path(args.cache), version, name))
    print(f"tinygrad {version} {name}: {closing}")
    for tid, (outcome, msg) in sorted(results.items()):
      if outcome != "passed":
        listed.append(f"{tid}  {expected.get(tid) or f'{outcome}: {msg}'}")
        if tid not in expected: bad.append(f"{tid}: {outcome} and not an expected failure: {msg}")
      elif tid in expected: bad.append(f"{tid}: passes but is listed as an expected failure (remove it)")
  if args.write_expected:
    EXPECTED.write_text("# tinygrad tests that do not pass on tinygrad_rs, each with its reason (run_tinygrad_tests.py keeps this honest)\n" +
                        "\n".join(listed) + "\n")
  for b in bad: print(b)
  sys.exit(1 if bad and not args.write_expected else 0)

if __name__ == "__main__": main()
