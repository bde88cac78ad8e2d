//! Entry point of the lab's observation worker (Trunk builds it as `data-type="worker"`).

#![forbid(unsafe_code)]

fn main() {
    lab::observer::host::start();
}
