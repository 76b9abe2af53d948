//! Reading certification case IDs back (`arrowcert replay ID`, shrink
//! reports): the scenario a case ran on.

#![forbid(unsafe_code)]

/// The scenario name inside a certification case ID
/// (`producer/<path>/<scenario>[/batch:<i>[/slice:<o>+<l>]]` or
/// `consumer/<kind>/<variant>/<scenario>[/batch:<i>]`).
pub fn scenario_of(case_id: &str) -> Option<String> {
    // producer/device:<kind>/..., consumer/device:<kind>/...: the device
    // segment is not part of the path.
    let without_device;
    let case_id = match case_id.split_once("/device:") {
        Some((side, rest)) if !side.contains('/') => {
            without_device = format!("{side}/{}", rest.split_once('/')?.1);
            without_device.as_str()
        }
        _ => case_id,
    };
    let rest = match case_id.strip_prefix("producer/") {
        // producer/async/<schedule>/<scenario>: skip the schedule.
        Some(rest) if rest.starts_with("async/") => rest.split_once('/')?.1,
        Some(rest) => rest,
        None => {
            let rest = case_id.strip_prefix("consumer/")?;
            rest.split_once('/')?.1
        }
    };
    let (_, rest) = rest.split_once('/')?;
    // A batch (`/batch:<i>[/slice:...]`) or a slice of the whole stream
    // (`/slice:<o>+<l>`) follows the name.
    let name = match rest.find("/batch:").or_else(|| rest.find("/slice:")) {
        Some(i) => &rest[..i],
        None => rest,
    };
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names_come_out_of_case_ids() {
        assert_eq!(
            scenario_of("producer/array/gen/17@s3c1/batch:0/slice:1+2").as_deref(),
            Some("gen/17@s3c1")
        );
        assert_eq!(
            scenario_of("producer/stream/gold/generated_map").as_deref(),
            Some("gold/generated_map")
        );
        assert_eq!(
            scenario_of("producer/schema/primitive").as_deref(),
            Some("primitive")
        );
        assert_eq!(scenario_of("roundtrip/x"), None);
        assert_eq!(
            scenario_of("producer/stream/gen/3@s1/slice:4+5").as_deref(),
            Some("gen/3@s1")
        );
        assert_eq!(
            scenario_of("producer/async/r4/nested/slice:0+2").as_deref(),
            Some("nested")
        );
        assert_eq!(
            scenario_of("producer/device:emulated/device_stream/primitive/slice:1+0").as_deref(),
            Some("primitive")
        );
        assert_eq!(
            scenario_of("consumer/array/varied/gen/3@s1/batch:0").as_deref(),
            Some("gen/3@s1")
        );
        assert_eq!(
            scenario_of("consumer/stream_error/next-EIO/primitive").as_deref(),
            Some("primitive")
        );
        assert_eq!(scenario_of("producer/array/"), None);
        assert_eq!(
            scenario_of("producer/async/r1,cancel@0:race/gen/4@s1").as_deref(),
            Some("gen/4@s1")
        );
        assert_eq!(
            scenario_of("consumer/async/each-thread,error@1/nested").as_deref(),
            Some("nested")
        );
    }
}
