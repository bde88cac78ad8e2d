//! Entry point of the lab's model worker (Trunk builds it as `data-type="worker"`).

#![forbid(unsafe_code)]

fn main() {
    lab::worker::host::start();
}
