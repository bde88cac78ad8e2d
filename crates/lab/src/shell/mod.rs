//! The page around the panels: the app (panel list, table view, embedding), the embed code
//! for course authors, the URL that holds all state, and the browser glue (fetch, clock,
//! downloads, panic report).

pub mod app;
pub mod embed_code;
pub mod url;
pub mod web;
