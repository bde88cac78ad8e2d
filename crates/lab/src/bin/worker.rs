//! Entry point of the lab's model worker (Trunk builds it as `data-type="worker"`).

fn main() {
    lab::worker::start();
}
