//! A consumer that refused what it was handed: whether the spec lets it,
//! and what the refusal says.

use super::*;

/// A consumer refused a data case cleanly ([`refusal`]). What it refused
/// decides the verdict. The same data encoded plainly (offsets 0, every
/// buffer allocated) is what a type refusal refuses: "Consumers MAY decide
/// not to support all data types".
///
/// A single-variation case ([`Encoding::Only`]) whose plain twin the
/// consumer reads refused that variation: a limitation for non-zero
/// offsets and unaligned buffers ("Consumers MAY decide not to support
/// non-0-offset arrays", "... unaligned memory"), `consumer.read.accepts`
/// for any other (no permission covers it).
///
/// A varied case whose plain twin the consumer reads is handed over once
/// more, varied the same ways but aligned and with every offset 0: read
/// then, the refusal was of the non-zero offsets or the unaligned buffers,
/// a limitation too; refused again, the consumer refuses an encoding the
/// spec lets producers use (null_count -1, NULL pointers for zero-sized
/// buffers, ...), which no permission covers: `consumer.read.accepts`.
/// Either way it is also handed each variation alone (with the case's
/// seed), and the verdict names the variations it refused alone.
pub(super) fn refused(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    e: &CallError,
    obs: &mut Observations,
) -> Ended {
    let limitation = refusal(e);
    let seed = match enc {
        Encoding::Varied(seed) | Encoding::Only(_, seed) => seed,
        _ => return limitation,
    };
    // A panic a binding caught (ENOTRECOVERABLE) is an error, unless the
    // twins below show it refused only what the spec permits refusing:
    // "Consumers MAY decide not to support unaligned memory" (and
    // "non-0-offset arrays") says nothing of how a consumer refuses. A
    // broken read-back has that code too but is no refusal: the consumer
    // took the data (pyogrio's offset dictionaries read as garbage were a
    // limitation when the garbage was not UTF-8).
    let panicked =
        e.code() == Some(libc::ENOTRECOVERABLE) && !crate::plugin::streamed::read_back_broken(e);
    if !matches!(limitation, Ended::Limitation(_)) && !panicked {
        return limitation;
    }
    // Off the CPU a refusal that came from reading before the data was
    // there was told apart before this (the settled rerun in data_case:
    // consumer.sync.waits); the twins would hand the data over with its
    // writes pending again and tell nothing more about the encoding.
    if spec.device != crate::device::Kind::Cpu {
        return limitation;
    }
    // What the consumer answers to the same data in another encoding:
    // Ok(()) read, Err(its words) refused (or could not be handed over).
    let answer = |enc: Encoding| -> Result<(), String> {
        match attempt(consumer, scenario, spec, kind, enc, Handover::First, None) {
            Ok(a) => a.result.map(|_| ()).map_err(|e| e.to_string()),
            Err(why) => Err(why),
        }
    };
    if answer(Encoding::Plain).is_err() {
        return limitation;
    }
    let why = match &limitation {
        Ended::Limitation(why) => why.clone(),
        _ => format!("the consumer refused by a panic it caught ({e})"),
    };
    if let Encoding::Only(v, _) = enc {
        if v.refusable() {
            return Ended::Limitation(format!(
                "{why} (refused: {}; the same data encoded plainly was read: {})",
                v.name(),
                permission(v)
            ));
        }
        // A caught panic on a variation no permission covers stays the
        // error it was.
        if panicked {
            return limitation;
        }
        obs.check(crate::rule!("consumer.read.accepts"), false, "input", || {
            format!(
                "the consumer reads this data encoded plainly but refused it with one variation the spec lets producers use and no permission covers (refused: {}): {e}",
                v.name()
            )
        });
        return Ended::Ran;
    }
    // Refusals are rare: each variation alone, to say which it refused.
    let alone: Vec<Variation> = Variation::ALL
        .into_iter()
        .filter(|&v| answer(Encoding::Only(v, seed)).is_err())
        .collect();
    let (permitted, other): (Vec<Variation>, Vec<Variation>) =
        alone.iter().partition(|v| v.refusable());
    let names = |vs: &[Variation]| vs.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ");
    let at_zero = answer(Encoding::VariedAlignedAtZero(seed));
    if at_zero.is_ok() {
        let which = if alone.is_empty() {
            "none alone: only with the other variations".to_string()
        } else {
            names(&alone)
        };
        let quotes: Vec<&str> = permitted.iter().map(|&v| permission(v)).collect();
        return Ended::Limitation(format!(
            "{why} (refused: {which}; non-zero offsets or unaligned memory: the same data, varied the same ways but aligned and at offset 0, was read{}{})",
            if quotes.is_empty() { "" } else { ": " },
            quotes.join(", ")
        ));
    }
    if panicked {
        return limitation;
    }
    let again = at_zero.err().unwrap_or_default();
    obs.check(crate::rule!("consumer.read.accepts"), false, "input", || {
        let which = if other.is_empty() {
            format!(
                "refused alone: {}; each variation no permission covers was read alone, only their combination was refused",
                if alone.is_empty() { "none".to_string() } else { names(&alone) }
            )
        } else {
            format!("refused: {}", names(&other))
        };
        format!(
            "the consumer reads this data encoded plainly but refused it encoded as the spec also lets producers encode it, even aligned and with every offset 0 (so not a refusal of offsets or unaligned memory, which the spec permits) ({which}): {e}; aligned at offset 0: {again}"
        )
    });
    Ended::Ran
}

/// The sentence of CDataInterface.rst that lets consumers refuse `v`.
pub(super) fn permission(v: Variation) -> &'static str {
    match v {
        Variation::Offset => "\"Consumers MAY decide not to support non-0-offset arrays\"",
        Variation::Unaligned => "\"Consumers MAY decide not to support unaligned memory\"",
        _ => "",
    }
}

/// A consumer's refusal of data the harness exported correctly. The spec
/// lets consumers refuse: "Consumers MAY decide not to support all data
/// types" and the same of "non-0-offset arrays" and "unaligned memory"
/// (CDataInterface.rst); no sentence names the errno to use. A clean
/// refusal, a non-zero code with a message saying why (its structures
/// released, which the handover rules judge apart), is a limitation
/// carrying the consumer's own words, whatever errno it uses; ENOSYS is
/// the plugin contract's "cannot honour" and stands without a message. A
/// refusal with neither is an error: not a pass, not a rule broken.
pub(in crate::certify) fn refusal(e: &CallError) -> Ended {
    match e.refusal() {
        Refusal::Skip(why) => Ended::Skip(why),
        Refusal::Limitation(why) => Ended::Limitation(why),
        Refusal::Error(why) => Ended::Error(why),
    }
}

/// With `ARROWCERT_KEEP_OUTPUT=DIR`, writes what the consumer wrote back
/// (Arrow IPC stream bytes) to `DIR/<case ID, '/' as '~'>.arrows`, to read
/// with another implementation when a verdict needs a second opinion.
/// Best effort: a failed write is reported on stderr, never a verdict.
pub(super) fn keep_output(id: &str, bytes: &[u8]) {
    let Some(dir) = std::env::var_os("ARROWCERT_KEEP_OUTPUT") else {
        return;
    };
    let path = std::path::Path::new(&dir).join(format!("{}.arrows", id.replace('/', "~")));
    if let Err(e) = std::fs::write(&path, bytes) {
        eprintln!("ARROWCERT_KEEP_OUTPUT: {}: {e}", path.display());
    }
}
