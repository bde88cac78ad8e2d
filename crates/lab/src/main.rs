//! Entry point of the browser lab: reports panics on the page, mounts the app.

#![forbid(unsafe_code)]

fn main() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        lab::report_panic(&info.to_string());
    }));
    leptos::mount::mount_to_body(lab::App);
}
