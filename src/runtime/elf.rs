//! An in-process linker for the CPU device (tinygrad `runtime/support/elf.py` with `ClangJITCompiler`'s loader).
//! In: a relocatable x86-64 ELF object, as `cc -c -fPIC` writes it. Out: its code mapped executable with every
//! relocation applied, and the addresses of the functions it defines. Functions it calls but does not define
//! (libm's `expf`, `memcpy`) resolve to this process's definitions through jump stubs placed after the code, so a
//! kernel needs no linker run and no `dlopen`: that is most of a small kernel's compile time.

use libloading::os::unix::Library;
use memmap2::{Mmap, MmapMut};
use object::elf::{
    R_X86_64_64, R_X86_64_GOTPCREL, R_X86_64_GOTPCRELX, R_X86_64_PC32, R_X86_64_PLT32, R_X86_64_REX_GOTPCRELX, SHF_ALLOC, SHF_WRITE,
};
use object::{
    Architecture, Object, ObjectKind, ObjectSection, ObjectSymbol, RelocationFlags, RelocationTarget, SectionFlags, SectionIndex,
    SymbolIndex, SymbolKind,
};
use rustc_hash::FxHashMap;
use std::sync::LazyLock;

/// An object's sections in executable memory. Valid while it lives; function addresses come from [`Image::symbol`].
#[derive(Debug)]
pub struct Image {
    map: Mmap,
    /// The defined functions and data, by name: their offset in `map`.
    symbols: FxHashMap<String, usize>,
}

/// A jump stub: `jmp *0(%rip)` then the target's 8-byte address, which doubles as its GOT slot.
const STUB: usize = 16;
const JMP_RIP: [u8; 6] = [0xff, 0x25, 0, 0, 0, 0];

/// This process's libraries, searched in order for the functions an object calls: everything loaded (libc, and
/// libm when something linked it), then libm itself.
static LIBS: LazyLock<Vec<Library>> = LazyLock::new(|| {
    // SAFETY: libm's initializers are the C library's own, safe to run at any time.
    let libm = unsafe { Library::new("libm.so.6") }.ok();
    [Some(Library::this())].into_iter().chain([libm]).flatten().collect()
});

/// The address of the function or data `name` in this process, if it has one (its libraries', else [`runtime`]'s).
fn process_symbol(name: &str) -> Option<usize> {
    LIBS.iter()
        .find_map(|lib| {
            // SAFETY: only the address is taken; nothing is called or read through it here.
            unsafe { lib.get::<*const u8>(name.as_bytes()) }.ok().map(|s| *s as usize)
        })
        .or_else(|| runtime(name))
}

/// Compiler runtime functions that kernels may call and no library of this process defines: clang's half <->
/// float conversions on x86-64 without F16C (`CPU_TARGET=x86-64-v2`), compiler-rt's, which libgcc lacks.
fn runtime(name: &str) -> Option<usize> {
    match name {
        "__gnu_h2f_ieee" => Some(gnu_h2f_ieee as *const () as usize),
        "__gnu_f2h_ieee" => Some(gnu_f2h_ieee as *const () as usize),
        _ => None,
    }
}

/// compiler-rt `__gnu_h2f_ieee`: the float of half bits `h`.
extern "C" fn gnu_h2f_ieee(h: u16) -> f32 {
    half::f16::from_bits(h).to_f32()
}

/// compiler-rt `__gnu_f2h_ieee`: the half bits of `f`, rounded to nearest even.
extern "C" fn gnu_f2h_ieee(f: f32) -> u16 {
    half::f16::from_f32(f).to_bits()
}

/// Appends `functions` (address, size in bytes, name) to `/tmp/perf-<pid>.map`, where `perf report` looks up the
/// code of a JIT (`PERF_MAP=1`): per-kernel time in a profile of a real workload, without DEBUG=2's timing.
fn perf_map<'a>(functions: impl Iterator<Item = (usize, u64, &'a str)>) {
    use std::{io::Write, os::unix::fs::OpenOptionsExt};
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let lines: String = functions.map(|(at, size, name)| format!("{at:x} {size:x} {name}\n")).collect();
    // (best effort: a profile without names is all a failed write costs)
    let file = std::fs::OpenOptions::new().create(true).append(true).custom_flags(libc::O_NOFOLLOW).open(path);
    let _ = file.and_then(|mut f| f.write_all(lines.as_bytes()));
}

impl Image {
    /// Maps relocatable object `obj` and applies its relocations. Errors (as text) on anything but an x86-64
    /// relocatable object, writable data, a relocation kind kernels never need, an offset out of 32-bit reach,
    /// or a function this process does not define.
    pub fn load(obj: &[u8]) -> Result<Image, String> {
        let file = object::File::parse(obj).map_err(|e| format!("not an ELF object: {e}"))?;
        if file.kind() != ObjectKind::Relocatable || file.architecture() != Architecture::X86_64 {
            return Err(format!("a {:?} object for {:?}; expected a relocatable x86-64 one", file.kind(), file.architecture()));
        }
        // lay the allocated sections out one after another, each at its alignment
        let (mut at, mut base): (usize, FxHashMap<SectionIndex, usize>) = (0, FxHashMap::default());
        for s in file.sections() {
            let SectionFlags::Elf { sh_flags } = s.flags() else { unreachable!("an ELF file has ELF section flags") };
            if sh_flags & u64::from(SHF_ALLOC) == 0 || s.size() == 0 {
                continue;
            }
            if sh_flags & u64::from(SHF_WRITE) != 0 {
                return Err(format!("section {} is writable data, which kernels never have", s.name().unwrap_or("?")));
            }
            at = at.next_multiple_of(s.align().max(1) as usize);
            base.insert(s.index(), at);
            at += s.size() as usize;
        }
        // one stub per symbol the object leaves undefined or reaches through the GOT
        let stubs_at = at.next_multiple_of(STUB);
        let mut stubs: FxHashMap<SymbolIndex, usize> = FxHashMap::default();
        let mut map =
            MmapMut::map_anon(stubs_at + STUB * file.symbols().count() + 1).map_err(|e| format!("mapping memory for code: {e}"))?;
        for s in file.sections().filter(|s| base.contains_key(&s.index())) {
            let data = s.data().map_err(|e| e.to_string())?;
            map[base[&s.index()]..][..data.len()].copy_from_slice(data);
        }
        let origin = map.as_ptr() as usize;
        let address = |idx: SymbolIndex| -> Result<usize, String> {
            let sym = file.symbol_by_index(idx).map_err(|e| e.to_string())?;
            match sym.section_index() {
                Some(sec) => base
                    .get(&sec)
                    .map(|b| origin + b + sym.address() as usize)
                    .ok_or_else(|| format!("symbol {idx:?} is in an unmapped section")),
                None => {
                    let name = sym.name().map_err(|e| e.to_string())?;
                    process_symbol(name).ok_or_else(|| format!("calls `{name}`, which this process does not define"))
                }
            }
        };
        let mut stub = |map: &mut MmapMut, idx: SymbolIndex| -> Result<usize, String> {
            let n = stubs.len();
            if let Some(at) = stubs.get(&idx) {
                return Ok(origin + at);
            }
            let at = stubs_at + n * STUB;
            map[at..at + 6].copy_from_slice(&JMP_RIP);
            map[at + 6..at + 14].copy_from_slice(&(address(idx)? as u64).to_le_bytes());
            stubs.insert(idx, at);
            Ok(origin + at)
        };
        for s in file.sections().filter(|s| base.contains_key(&s.index())) {
            for (offset, rel) in s.relocations() {
                let RelocationTarget::Symbol(idx) = rel.target() else {
                    return Err(format!("relocation {:?} has no symbol", rel.target()));
                };
                let (RelocationFlags::Elf { r_type }, false) = (rel.flags(), rel.has_implicit_addend()) else {
                    return Err("a relocation without an explicit addend".into());
                };
                let place = base[&s.index()] + offset as usize;
                let p = (origin + place) as i64;
                let undefined = file.symbol_by_index(idx).map_err(|e| e.to_string())?.is_undefined();
                let pc32 = |target: usize| {
                    i32::try_from(target as i64 + rel.addend() - p)
                        .map(i32::to_le_bytes)
                        .map_err(|_| format!("relocation {r_type} out of 32-bit reach"))
                };
                let value = match r_type {
                    R_X86_64_PC32 | R_X86_64_PLT32 if !undefined => pc32(address(idx)?)?.to_vec(),
                    R_X86_64_PC32 | R_X86_64_PLT32 => pc32(stub(&mut map, idx)?)?.to_vec(),
                    R_X86_64_GOTPCREL | R_X86_64_GOTPCRELX | R_X86_64_REX_GOTPCRELX => pc32(stub(&mut map, idx)? + 6)?.to_vec(),
                    R_X86_64_64 => ((address(idx)? as i64 + rel.addend()) as u64).to_le_bytes().to_vec(),
                    _ => return Err(format!("relocation type {r_type}, which kernels never need")),
                };
                map[place..place + value.len()].copy_from_slice(&value);
            }
        }
        let symbols = file
            .symbols()
            .filter_map(|sym| Some((sym.name().ok()?.to_string(), base.get(&sym.section_index()?)? + sym.address() as usize)))
            .filter(|(name, _)| !name.is_empty())
            .collect();
        let map = map.make_exec().map_err(|e| format!("making code executable: {e}"))?;
        if crate::helpers::PERF_MAP.value() != 0 {
            let funcs = file.symbols().filter(|s| s.kind() == SymbolKind::Text && s.size() > 0);
            perf_map(
                funcs.filter_map(|s| Some((origin + base.get(&s.section_index()?)? + s.address() as usize, s.size(), s.name().ok()?))),
            );
        }
        Ok(Image { map, symbols })
    }

    /// The address of the object's function or data `name`, valid while `self` lives.
    pub fn symbol(&self, name: &str) -> Option<*const u8> {
        self.symbols.get(name).map(|&at| self.map[at..].as_ptr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines_name_each_function() {
        perf_map([(0xdead_0000, 0x40, "r_test_perf_map_a"), (0xdead_0040, 0x8, "E_test_perf_map_b")].into_iter());
        let path = format!("/tmp/perf-{}.map", std::process::id());
        let map = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(map.contains("dead0000 40 r_test_perf_map_a\n") && map.contains("dead0040 8 E_test_perf_map_b\n"), "{map}");
    }

    #[test]
    fn rejects_what_it_cannot_link() {
        assert!(Image::load(b"\x7fELF garbage").unwrap_err().starts_with("not an ELF object"));
        assert!(process_symbol("memcpy").is_some() && process_symbol("expf").is_some());
        assert!(process_symbol("__gnu_h2f_ieee").is_some() && process_symbol("__gnu_f2h_ieee").is_some());
        assert_eq!(process_symbol("no_such_function_anywhere"), None);
    }

    #[test]
    fn the_half_conversions_round_as_ieee() {
        // (1.0, the largest half, 1 + 2^-11 halfway to even 1.0, 65520 to infinity, the smallest subnormal)
        assert_eq!(
            [1.0, 65504.0, 1.0 + 2f32.powi(-11), 65520.0, 2f32.powi(-24)].map(|f| gnu_f2h_ieee(f)),
            [0x3c00, 0x7bff, 0x3c00, 0x7c00, 1]
        );
        assert_eq!([0x3c00u16, 0xc000, 0x0001, 0x7c00].map(|h| gnu_h2f_ieee(h)), [1.0, -2.0, 2f32.powi(-24), f32::INFINITY]);
        assert!(gnu_h2f_ieee(0x7e00).is_nan());
    }
}
