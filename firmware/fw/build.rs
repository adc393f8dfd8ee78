fn main() {
    // esp-hal's linker script; it must be the last `-T` argument.
    println!("cargo:rustc-link-arg=-Tlinkall.x");
}
