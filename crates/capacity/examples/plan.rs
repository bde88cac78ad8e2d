//! Prints the default plan for a trace preset as Markdown: `cargo run -p capacity --example plan -- poisson`.

fn main() {
    let preset = std::env::args().nth(1).unwrap_or_else(|| "poisson".into());
    match capacity::PlanInputs::tiny_lab(&preset).and_then(|inputs| capacity::Plan::run(&inputs)) {
        Ok(report) => print!("{}", report.to_markdown()),
        Err(e) => eprintln!("error: {e}"),
    }
}
