//! Where kgrag keeps a user's files outside any project: the per-user data folder.

use std::path::PathBuf;

/// The per-user folder of kgrag's model assets: `$XDG_DATA_HOME/kgrag/assets`, else
/// `~/.local/share/kgrag/assets` (on macOS `~/Library/Application Support/kgrag/assets`, on Windows
/// `%APPDATA%\\kgrag\\assets`); `None` without a home folder. `cargo xtask fetch-assets` fills it and the
/// local models look there.
pub fn user_assets_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = if cfg!(windows) {
        var("APPDATA")?
    } else if cfg!(target_os = "macos") {
        var("HOME")?.join("Library").join("Application Support")
    } else {
        var("XDG_DATA_HOME").or_else(|| Some(var("HOME")?.join(".local").join("share")))?
    };
    Some(base.join("kgrag").join("assets"))
}
