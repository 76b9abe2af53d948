//! `arrowcert inspect <lib>`: what a plugin is and what it offers.

use serde::Serialize;

use super::BadInput;
use crate::abi::device;
use crate::plugin::{Plugin, SYMBOLS};

#[derive(Serialize)]
struct Inspection<'a> {
    name: &'a str,
    path: String,
    sha256: String,
    abi_version: i32,
    roles: Vec<&'static str>,
    entry_points: Vec<EntryPoint>,
    devices: Vec<&'static str>,
    devices_declared: bool,
    /// An Arrow C data integration library behind the built-in adapter:
    /// its own entry points, which the ones above stand for.
    #[serde(skip_serializing_if = "Option::is_none")]
    integration_entry_points: Option<Vec<&'static str>>,
}

#[derive(Serialize)]
struct EntryPoint {
    symbol: &'static str,
    present: bool,
}

/// Prints what the plugin at `path` is. Returns the process exit code.
pub fn run(plugin: &Plugin, json: bool) -> i32 {
    let mut roles = Vec::new();
    if plugin.is_producer() {
        roles.push("producer");
    }
    if plugin.is_consumer() {
        roles.push("consumer");
    }
    let devices: Vec<&'static str> = device::ALL
        .iter()
        .filter(|d| plugin.supports_device(**d))
        .filter_map(|d| device::name(*d))
        .collect();
    let info = Inspection {
        name: plugin.name(),
        path: plugin.path().display().to_string(),
        sha256: crate::report::sha256_file(plugin.path()).unwrap_or_default(),
        abi_version: plugin.abi_version(),
        roles,
        entry_points: SYMBOLS
            .iter()
            .map(|(s, _)| EntryPoint {
                symbol: s,
                present: plugin.has(s),
            })
            .collect(),
        devices,
        devices_declared: plugin.has("arrowcert_plugin_supports_device"),
        integration_entry_points: plugin.adapts(),
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&info).expect("inspection serialises")
        );
        return 0;
    }
    println!("name:         {}", info.name);
    println!("path:         {}", info.path);
    println!("sha256:       {}", info.sha256);
    println!("abi version:  {}", info.abi_version);
    if let Some(e) = &info.integration_entry_points {
        println!("adapts:       {}", e.join(", "));
    }
    println!(
        "roles:        {}",
        if info.roles.is_empty() {
            "none (no producer or consumer entry points)".to_string()
        } else {
            info.roles.join(", ")
        }
    );
    println!(
        "devices:      {}{}",
        if info.devices.is_empty() {
            "none".to_string()
        } else {
            info.devices.join(", ")
        },
        if info.devices_declared {
            ""
        } else {
            " (arrowcert_plugin_supports_device absent: CPU only)"
        }
    );
    println!("entry points:");
    for e in &info.entry_points {
        println!("  {:<34} {}", e.symbol, if e.present { "yes" } else { "-" });
    }
    0
}

/// The flags of `arrowcert inspect` (their help is the command's).
#[derive(clap::Args)]
pub struct InspectFlags {
    /// Path to the plugin's shared library (or a bundled name: `reference`).
    pub lib: String,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `arrowcert inspect`, from its flags.
pub fn inspect_command(f: InspectFlags) -> Result<i32, BadInput> {
    let InspectFlags { lib, json } = f;
    let path = crate::registry::resolve_plugin(&lib, "producer")
        .or_else(|_| crate::registry::resolve_plugin(&lib, "consumer"))?;
    let plugin = crate::plugin::Plugin::load(&path).map_err(|e| BadInput(e.to_string()))?;
    Ok(run(&plugin, json))
}
