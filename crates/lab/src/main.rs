//! Entry point of the browser lab: mounts the app and nothing else.

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(lab::App);
}
