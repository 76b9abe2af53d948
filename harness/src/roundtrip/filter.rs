//! Case selection, as `cargo test` does it: substrings (any may match),
//! `--exact` for whole IDs, `--skip` substrings to leave out.

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub patterns: Vec<String>,
    pub exact: bool,
    pub skip: Vec<String>,
}

impl Filter {
    /// Whether this filter leaves cases out (a subset of the plan runs).
    pub fn narrows(&self) -> bool {
        !self.patterns.is_empty() || !self.skip.is_empty()
    }

    pub fn selects(&self, id: &str) -> bool {
        if self.skip.iter().any(|s| id.contains(s.as_str())) {
            return false;
        }
        if self.patterns.is_empty() {
            return true;
        }
        self.patterns.iter().any(|p| {
            if self.exact {
                id == p
            } else {
                id.contains(p.as_str())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring_exact_and_skip() {
        let all = Filter::default();
        assert!(all.selects("array/primitive/batch:0"));
        let sub = Filter {
            patterns: vec!["primitive".into()],
            ..Default::default()
        };
        assert!(sub.selects("array/primitive/batch:0"));
        assert!(!sub.selects("array/nested/batch:0"));
        let exact = Filter {
            patterns: vec!["array/primitive/batch:0".into()],
            exact: true,
            ..Default::default()
        };
        assert!(exact.selects("array/primitive/batch:0"));
        assert!(!exact.selects("array/primitive/batch:0/slice:13+12"));
        let skip = Filter {
            skip: vec!["async".into()],
            ..Default::default()
        };
        assert!(!skip.selects("async/primitive"));
        assert!(skip.selects("stream/primitive"));
    }
}
