//! Embeds the shaders of `src/shaders/` without their comments, so the model worker's
//! wasm carries the kernels' code, not their documentation (5 kB gzipped). Each line keeps
//! its place (a comment becomes an empty line), so a shader compiler's line numbers count
//! lines as the files do. WGSL has no string literals, so `//` always opens a comment.

use std::path::Path;
use std::{env, fs};

fn main() {
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let shaders = Path::new("src/shaders");
    println!("cargo:rerun-if-changed={}", shaders.display());
    let entries = fs::read_dir(shaders).expect("src/shaders is readable");
    for entry in entries {
        let path = entry.expect("a readable directory entry").path();
        if path.extension().is_none_or(|e| e != "wgsl") {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
        let source = fs::read_to_string(&path).expect("a shader in UTF-8");
        let code: Vec<&str> = source
            .lines()
            .map(|line| line.split("//").next().unwrap_or_default().trim())
            .collect();
        let name = path.file_name().expect("a shader file's name");
        fs::write(Path::new(&out).join(name), code.join("\n") + "\n").expect("OUT_DIR is writable");
    }
}
