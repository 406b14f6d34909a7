//! `scripts/layout/cc-hot-first`, the x86_64 link wrapper: with fake `cc`,
//! `nm` and `c++filt` on PATH and a fixture list, it orders exact (hashed)
//! matches first in the list's order, then name-only matches, leaves
//! everything else out, drops the unwind tables of a program that cannot
//! unwind, and otherwise links exactly as asked.
#![allow(clippy::disallowed_methods)] // tests write files and run the script directly

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A copy of the script beside a fixture list, and fake tools.
struct Setup {
    dir: tempfile::TempDir,
}

/// Symbols of the fake object: mangled name, demangled name.
const SYMBOLS: &[(&str, &str)] = &[
    ("M_cold", "cold_fn::h4444444444444444"),
    ("M_generic_other", "generic_fn::h3333333333333333"),
    ("M_generic", "generic_fn::h2222222222222222"),
    ("M_idle", "idle_fn::h1111111111111111"),
];

/// What the fake object's undefined symbols say about unwinding.
#[derive(Clone, Copy, PartialEq)]
enum Panics {
    /// `panic = "unwind"` under fat LTO: the object raises unwinds.
    Unwind,
    /// `panic = "abort"`: nothing raises one.
    Abort,
}

impl Setup {
    fn new(nm_works: bool) -> Setup {
        Setup::with(nm_works, Panics::Unwind)
    }

    fn with(nm_works: bool, panics: Panics) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("layout");
        fs::create_dir_all(&layout).unwrap();
        let script = smolcord_testkit::repo_root().join("scripts/layout/cc-hot-first");
        fs::copy(&script, layout.join("cc-hot-first")).unwrap();
        // The list's order, not the object's, decides: idle_fn first.
        fs::write(
            layout.join("hot-functions.x86_64-unknown-linux-gnu.test.txt"),
            "idle_fn::h1111111111111111\ngeneric_fn::h2222222222222222\n",
        )
        .unwrap();
        fs::write(
            layout.join("hot-functions.x86_64-unknown-linux-musl.test.txt"),
            "cold_fn::h4444444444444444\n",
        )
        .unwrap();
        let bin = dir.path().join("bin");
        fs::create_dir_all(&bin).unwrap();
        let args = dir.path().join("cc-args");
        tool(
            &bin,
            "cc",
            &format!("printf '%s\\n' \"$@\" > '{}'", args.display()),
        );
        let nm_lines: String = SYMBOLS
            .iter()
            .map(|(mangled, _)| format!("echo '{mangled} t 0 10'\n"))
            .collect();
        let undefined = match panics {
            Panics::Unwind => "echo '_Unwind_RaiseException U'",
            Panics::Abort => "echo '_Unwind_Backtrace U'",
        };
        let nm = format!("if [ \"$1\" = --undefined-only ]; then\n{undefined}\nelse\n{nm_lines}fi");
        tool(&bin, "nm", &if nm_works { nm } else { "exit 1".into() });
        let cases: String = SYMBOLS
            .iter()
            .map(|(mangled, demangled)| format!("    {mangled}) echo '{demangled}' ;;\n"))
            .collect();
        tool(
            &bin,
            "c++filt",
            &format!(
                "while read -r l; do case \"$l\" in\n{cases}    *) echo \"$l\" ;;\n  esac; done"
            ),
        );
        Setup { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Runs the wrapper with `args`; what the fake `cc` received.
    fn link(&self, args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
        let path = format!("{}:/usr/bin:/bin", self.path("bin").display());
        let status = Command::new("sh")
            .arg(self.path("layout/cc-hot-first"))
            .args(args)
            .env("PATH", path)
            .envs(env.iter().copied())
            .status()
            .unwrap();
        assert!(status.success(), "the wrapper failed: {status}");
        fs::read_to_string(self.path("cc-args"))
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Where cargo links the release binary (the directory exists).
    fn out(&self) -> String {
        let deps = self.path("release/deps");
        fs::create_dir_all(&deps).unwrap();
        deps.join("smolcord-0123").display().to_string()
    }
}

fn tool(bin: &Path, name: &str, body: &str) {
    let path = bin.join(name);
    fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn lld_links_of_the_release_binary_get_the_hot_functions_first() {
    let setup = Setup::new(true);
    let out = setup.out();
    let args = setup.link(&["-fuse-ld=lld", "x.rcgu.o", "-o", &out], &[]);
    let order_file = format!("{out}.hot-order");
    assert_eq!(
        args,
        [
            "-fuse-ld=lld",
            "x.rcgu.o",
            "-o",
            &out,
            &format!("-Wl,--symbol-ordering-file={order_file}"),
            "-Wl,--no-warn-symbol-ordering",
        ]
    );
    let order = fs::read_to_string(&order_file).unwrap();
    // Exact matches in the list's order, then the other instance of the
    // generic; the cold function not at all.
    assert_eq!(order, "M_idle\nM_generic\nM_generic_other\n");
}

#[test]
fn other_links_are_left_as_they_are() {
    let setup = Setup::new(true);
    let out = setup.out();
    // GNU ld (Rust before 1.90): no ordering.
    let args = setup.link(&["x.rcgu.o", "-o", &out], &[]);
    assert_eq!(args, ["x.rcgu.o", "-o", &out]);
    // A test binary or a debug build: no ordering.
    let debug = setup.path("debug/deps/smolcord-0123").display().to_string();
    let args = setup.link(&["-fuse-ld=lld", "x.rcgu.o", "-o", &debug], &[]);
    assert_eq!(args, ["-fuse-ld=lld", "x.rcgu.o", "-o", &debug]);
}

#[test]
fn a_failing_tool_means_an_ordinary_link() {
    let setup = Setup::new(false);
    let out = setup.out();
    let args = setup.link(&["-fuse-ld=lld", "x.rcgu.o", "-o", &out], &[]);
    assert_eq!(args, ["-fuse-ld=lld", "x.rcgu.o", "-o", &out]);
}

#[test]
fn the_profile_build_keeps_its_symbols() {
    let setup = Setup::new(true);
    let out = setup.out();
    let linked =
        |env: &[(&str, &str)]| setup.link(&["x.rcgu.o", "-Wl,--strip-all", "-o", &out], env);
    assert!(linked(&[]).contains(&"-Wl,--strip-all".to_owned()));
    let args = linked(&[("SMOLCORD_LAYOUT_SYMBOLS", "1")]);
    assert_eq!(args, ["x.rcgu.o", "-o", &out]);
}

#[test]
fn a_static_musl_link_uses_the_shipped_lld_and_the_musl_list() {
    let setup = Setup::new(true);
    let rustlib = setup.path("sysroot/lib/rustlib");
    let crt = rustlib.join("x86_64-unknown-linux-musl/lib/self-contained/rcrt1.o");
    let gcc_ld = rustlib.join("x86_64-unknown-linux-gnu/bin/gcc-ld");
    fs::create_dir_all(&gcc_ld).unwrap();
    tool(&gcc_ld, "ld.lld", "exit 0");
    let out = setup.out();
    let crt = crt.display().to_string();
    let args = setup.link(&[&crt, "x.rcgu.o", "-o", &out], &[]);
    let order_file = format!("{out}.hot-order");
    assert_eq!(
        args,
        [
            crt.as_str(),
            "x.rcgu.o",
            "-o",
            &out,
            "-fuse-ld=lld",
            &format!("-B{}", gcc_ld.display()),
            &format!("-Wl,--symbol-ordering-file={order_file}"),
            "-Wl,--no-warn-symbol-ordering",
        ]
    );
    assert_eq!(fs::read_to_string(&order_file).unwrap(), "M_cold\n");
}

#[test]
fn a_static_musl_binary_that_cannot_unwind_is_linked_without_unwind_tables() {
    let setup = Setup::with(true, Panics::Abort);
    let out = setup.out();
    let crt =
        setup.path("sysroot/lib/rustlib/x86_64-unknown-linux-musl/lib/self-contained/rcrt1.o");
    let crt = crt.display().to_string();
    let no_tables = format!(
        "-Wl,-T,{}",
        setup.path("layout/no-unwind-tables.ld").display()
    );
    let args = setup.link(&[&crt, "x.rcgu.o", "-o", &out], &[]);
    assert_eq!(args, [&crt, "x.rcgu.o", "-o", &out, &no_tables]);
    // panic_unwind linked as an rlib (no LTO): the tables stay.
    let args = setup.link(
        &[&crt, "x.rcgu.o", "libpanic_unwind-0a1b.rlib", "-o", &out],
        &[],
    );
    assert!(!args.contains(&no_tables), "{args:?}");
    // The glibc build keeps them (glibc's pthread_exit unwinds).
    let args = setup.link(&["x.rcgu.o", "-o", &out], &[]);
    assert_eq!(args, ["x.rcgu.o", "-o", &out]);
    // A test binary or a debug build: untouched.
    let debug = setup.path("debug/deps/smolcord-0123").display().to_string();
    let args = setup.link(&[&crt, "x.rcgu.o", "-o", &debug], &[]);
    assert_eq!(args, [&crt, "x.rcgu.o", "-o", &debug]);
}

#[test]
fn the_linker_script_drops_the_tables_and_keeps_a_working_program() {
    // A real link (the host's cc and linker, as the wrapper would run them)
    // of a C program whose compiler emits unwind tables.
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("main.c");
    fs::write(&source, "int main(void) { return 7; }\n").unwrap();
    let script = smolcord_testkit::repo_root().join("scripts/layout/no-unwind-tables.ld");
    let sections = |extra: &[String]| {
        let exe = dir.path().join(format!("main{}", extra.len()));
        let status = Command::new("cc")
            .args(["-fasynchronous-unwind-tables", "-o"])
            .arg(&exe)
            .arg(&source)
            .args(extra)
            .status()
            .expect("cc (the x86_64 link runs it too)");
        assert!(status.success(), "cc failed: {status}");
        let ran = Command::new(&exe).status().unwrap();
        assert_eq!(ran.code(), Some(7), "the linked program does not run");
        let out = Command::new("readelf")
            .arg("-SW")
            .arg(&exe)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        sections(&[]).contains(".eh_frame"),
        "no tables to drop: the test proves nothing"
    );
    let without = sections(&[format!("-Wl,-T,{}", script.display())]);
    assert!(!without.contains(".eh_frame"), "{without}");
    assert!(without.contains(".text"), "{without}");
}
