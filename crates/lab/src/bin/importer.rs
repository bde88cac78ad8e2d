//! Entry point of the lab's importer (Trunk builds it as `data-type="worker"`).

#![forbid(unsafe_code)]

fn main() {
    lab::importer::host::start();
}
