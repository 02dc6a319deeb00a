"""Chats through `llm --serve`'s page in headless Chromium (Debian's chromium and chromedriver, driven by selenium);
run by tests/serve.rs.

  chat_page.py BASE_URL

Loads BASE_URL/?temperature=0&max_tokens=24, sends two messages through the page's input and button, and checks that
each reply read off the page is non-empty and equals the API's greedy reply to the same conversation (so the page
keeps the history). Exits non-zero at the first failed check.
"""
import json
import sys
import tempfile
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def api_reply(base, messages):
  body = json.dumps({"messages": messages, "temperature": 0, "max_tokens": 24}).encode()
  req = urllib.request.Request(base + "/v1/chat/completions", body, {"Content-Type": "application/json"})
  with urllib.request.urlopen(req, timeout=300) as r: return json.load(r)["choices"][0]["message"]["content"]


def main(base):
  opts = webdriver.ChromeOptions()
  opts.binary_location = "/usr/bin/chromium"
  for f in FLAGS: opts.add_argument(f)
  with tempfile.TemporaryDirectory() as profile:
    opts.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
      driver.get(base + "/?temperature=0&max_tokens=24")
      history = []
      for turn, question in enumerate(["What is the capital of France?", "And of Germany?"], 1):
        driver.find_element(By.ID, "input").send_keys(question)
        driver.find_element(By.ID, "send").click()
        WebDriverWait(driver, 300).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#messages .assistant[data-done]")) == turn)
        reply = driver.execute_script("return [...document.querySelectorAll('#messages .assistant')].pop().textContent")
        history.append({"role": "user", "content": question})
        expected = api_reply(base, history)
        if not reply or reply != expected: sys.exit(f"FAILED: turn {turn}: the page shows {reply!r}, the API answers {expected!r}")
        print(f"ok: turn {turn}: the page's reply equals the API's: {reply!r}")
        history.append({"role": "assistant", "content": reply})
    finally:
      driver.quit()


if __name__ == "__main__":
  main(sys.argv[1])
