//! Entry point of the lab's capacity planner worker (Trunk builds it as `data-type="worker"`).

#![forbid(unsafe_code)]

fn main() {
    lab::planner::host::start();
}
