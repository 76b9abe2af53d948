//! `arrowcert rules` and `arrowcert explain`: the rule catalogue.

use super::BadInput;

/// The flags of `arrowcert rules` (their help is the command's).
#[derive(clap::Args)]
pub struct RulesFlags {
    /// Only rules matching these: an ID, or a prefix ending in `*` (`array.*`).
    pub patterns: Vec<String>,
    /// Print the catalogue as Markdown (as in docs/RULES.md).
    #[arg(long)]
    pub markdown: bool,
}

/// `arrowcert rules`, from its flags.
pub fn rules_command(f: RulesFlags) -> Result<i32, BadInput> {
    let RulesFlags { patterns, markdown } = f;
    if markdown {
        print!("{}", crate::rules::markdown());
        return Ok(0);
    }
    if patterns.is_empty() {
        print!("{}", crate::rules::list());
        return Ok(0);
    }
    let mut any = false;
    for p in &patterns {
        for r in crate::rules::matching(p) {
            any = true;
            println!("{:<36} {:<6} {:<8} {}", r.id, r.level, r.side, r.summary);
        }
    }
    if !any {
        return Err(BadInput(format!(
            "no rule matches {}; `arrowcert rules` lists them",
            patterns.join(", ")
        )));
    }
    Ok(0)
}

/// The flags of `arrowcert explain` (their help is the command's).
#[derive(clap::Args)]
pub struct ExplainFlags {
    /// A rule ID (`array.null-count`) or a pattern (`device.*`).
    pub rule: String,
}

/// `arrowcert explain`, from its flags.
pub fn explain_command(f: ExplainFlags) -> Result<i32, BadInput> {
    let ExplainFlags { rule } = f;
    let found = crate::rules::matching(&rule);
    if found.is_empty() {
        let near: Vec<&str> = crate::rules::RULES
            .iter()
            .map(|r| r.id)
            .filter(|id| {
                let last = rule.rsplit('.').next().unwrap_or(&rule);
                !last.is_empty() && id.contains(last)
            })
            .take(5)
            .collect();
        return Err(BadInput(format!(
            "no rule {rule}{}; `arrowcert rules` lists them",
            if near.is_empty() {
                String::new()
            } else {
                format!(" (did you mean {}?)", near.join(", "))
            }
        )));
    }
    let texts: Vec<String> = found.iter().map(|r| crate::rules::explain(r)).collect();
    print!("{}", texts.join("\n"));
    Ok(0)
}
