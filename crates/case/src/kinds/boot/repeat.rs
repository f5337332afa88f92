//! Stage two for the fields of exact repetition: `rtc_base` (where the guest's RTC
//! starts) and `repeat_exactly` (boot twice, the consoles byte for byte the same).

use crate::common::Ctx;
use crate::CaseError;

/// What `rtc_base` accepts, for refusals.
const RTC_ACCEPTED: &str = "\"utc\" or \"localtime\" (the host's clock), a date such as \"2020-01-01\", or a date and time such as \"2020-01-01T00:00:00\" (UTC, no offset), as QEMU's -rtc base= takes them";

/// `rtc_base`: a string or a TOML local date or date-time, checked against what QEMU's
/// `-rtc base=` takes (and a real calendar date, which QEMU does not check).
pub(crate) fn rtc_base(ctx: &Ctx, value: Option<&toml::Value>) -> Result<Option<String>, CaseError> {
    let text = match value {
        None => return Ok(None),
        Some(toml::Value::String(text)) => text.clone(),
        Some(toml::Value::Datetime(datetime)) if datetime.offset.is_none() => datetime.to_string(),
        Some(toml::Value::Datetime(datetime)) => {
            return Err(ctx.err("rtc_base", format!("{datetime} is not accepted: {RTC_ACCEPTED}")))
        }
        Some(other) => return Err(ctx.err("rtc_base", format!("{other} is not accepted: {RTC_ACCEPTED}"))),
    };
    if text == "utc" || text == "localtime" || is_datetime(&text) {
        Ok(Some(text))
    } else {
        Err(ctx.err("rtc_base", format!("{text:?} is not accepted: {RTC_ACCEPTED}")))
    }
}

/// `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SS`, a real date from 1970 on.
fn is_datetime(text: &str) -> bool {
    let (date, time) = match text.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let fields = |part: &str, separator: char| -> Option<Vec<u32>> {
        let widths: &[usize] = if separator == '-' { &[4, 2, 2] } else { &[2, 2, 2] };
        let items: Vec<&str> = part.split(separator).collect();
        if items.len() != widths.len() {
            return None;
        }
        items
            .iter()
            .zip(widths)
            .map(|(item, width)| {
                (item.len() == *width && item.bytes().all(|b| b.is_ascii_digit())).then(|| item.parse().ok())?
            })
            .collect()
    };
    let Some(ymd) = fields(date, '-') else { return false };
    let (year, month, day) = (ymd[0], ymd[1], ymd[2]);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if year < 1970 || day == 0 || day > days {
        return false;
    }
    match time {
        None => true,
        Some(time) => fields(time, ':').is_some_and(|hms| hms[0] < 24 && hms[1] < 60 && hms[2] < 60),
    }
}

/// The bench owns QEMU's record/replay (it records a boot with typed input itself):
/// a case's `icount` may not set it.
pub(crate) fn icount_without_rr(ctx: &Ctx, icount: &str) -> Result<(), CaseError> {
    for suboption in icount.split(',') {
        let name = suboption.split('=').next().unwrap_or("");
        if ["rr", "rrfile", "rrsnapshot"].contains(&name) {
            return Err(ctx.err(
                "icount",
                format!("{icount:?} is not accepted: {name} is the bench's own (it records a boot with typed input itself, and --rr-replay replays it)"),
            ));
        }
    }
    Ok(())
}

/// `repeat_exactly` compares two whole consoles, so the guest must end them itself, and
/// it contradicts `distinct_across_boots` (which wants the boots to differ).
pub(crate) fn repeat_exactly(
    ctx: &Ctx,
    value: Option<bool>,
    poweroff: bool,
    distinct_across_boots: bool,
) -> Result<bool, CaseError> {
    let repeat = value.unwrap_or(false);
    if repeat && !poweroff {
        return Err(ctx.err(
            "repeat_exactly",
            "only with poweroff = true: the two consoles are compared whole, so the guest must end each boot itself",
        ));
    }
    if repeat && distinct_across_boots {
        return Err(ctx.err(
            "repeat_exactly",
            "not with distinct_across_boots: one wants the two boots the same, the other wants them to differ",
        ));
    }
    Ok(repeat)
}

#[cfg(test)]
mod tests {
    use super::is_datetime;

    #[test]
    fn dates_are_real_calendar_dates() {
        for good in ["2020-01-01", "2020-01-01T00:00:00", "2024-02-29", "1970-01-01T23:59:59"] {
            assert!(is_datetime(good), "{good}");
        }
        for bad in [
            "2020-1-01",
            "2023-02-29",
            "2020-13-01",
            "2020-00-10",
            "2020-01-32",
            "1969-12-31",
            "2020-01-01T24:00:00",
            "2020-01-01T00:60:00",
            "2020-01-01T00:00",
            "2020-01-01 00:00:00",
            "2020-01-01T00:00:00Z",
            "now",
            "",
        ] {
            assert!(!is_datetime(bad), "{bad}");
        }
    }
}
