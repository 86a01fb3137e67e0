//! Negative numbers as flag values in every spelling (`--step-size -1e-3`, `-.5`, `-inf`), so
//! that the range checks can name the flag: clap's `allow_negative_numbers` takes only plain
//! ones like `-1` and `-0.5`, and reads the others as unknown short flags.

use std::ffi::OsString;

/// `args` with each `--long-flag VALUE` pair joined into `--long-flag=VALUE` where the flag
/// takes a value and VALUE starts with '-' and reads as a number (Rust's `f64` syntax: `-1e-3`,
/// `-.5`, `-inf`, `-nan`). Nothing after a `--` is touched.
pub fn join_negative_values(
    args: impl IntoIterator<Item = OsString>,
    takes_value: impl Fn(&str) -> bool,
) -> Vec<OsString> {
    let mut joined: Vec<OsString> = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        if arg == "--" {
            joined.push(arg);
            joined.extend(args);
            break;
        }
        let flag = arg
            .to_str()
            .and_then(|a| a.strip_prefix("--"))
            .filter(|name| !name.is_empty() && !name.contains('=') && takes_value(name));
        let negative_next = args
            .peek()
            .and_then(|next| next.to_str())
            .is_some_and(|next| next.starts_with('-') && next.parse::<f64>().is_ok());
        match (flag, negative_next) {
            (Some(_), true) => {
                let mut pair = arg;
                pair.push("=");
                pair.push(args.next().expect("peeked"));
                joined.push(pair);
            }
            _ => joined.push(arg),
        }
    }
    joined
}

/// Whether a long flag of `command` or of any of its subcommands takes a value.
pub fn takes_value(command: &clap::Command, long: &str) -> bool {
    command.get_arguments().any(|arg| {
        arg.get_action().takes_values()
            && (arg.get_long() == Some(long)
                || arg
                    .get_all_aliases()
                    .is_some_and(|aliases| aliases.contains(&long)))
    }) || command.get_subcommands().any(|sub| takes_value(sub, long))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(args: &[&str]) -> Vec<String> {
        let valued = |name: &str| name != "mile";
        join_negative_values(args.iter().map(OsString::from), valued)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn every_spelling_of_a_negative_number_stays_the_flags_value() {
        for value in [
            "-1e-3",
            "-.5",
            "-inf",
            "-nan",
            "-1",
            "-0.5",
            "-1E4",
            "-infinity",
        ] {
            assert_eq!(
                joined(&["bnn", "run", "--step-size", value, "--out", "x"]),
                ["bnn", "run", &format!("--step-size={value}"), "--out", "x"],
                "{value}"
            );
        }
    }

    #[test]
    fn flags_words_switches_and_everything_after_a_double_dash_are_left_alone() {
        let unchanged: [&[&str]; 6] = [
            &["bnn", "run", "--step-size", "-x"],
            &["bnn", "run", "--dataset", "-"],
            &["bnn", "run", "--step-size", "--draws", "3"],
            &["bnn", "run", "--mile", "-1"],
            &["bnn", "run", "--step-size=-1e-3", "-2"],
            &["bnn", "run", "--", "--step-size", "-1e-3"],
        ];
        for args in unchanged {
            assert_eq!(joined(args), args, "{args:?}");
        }
    }

    #[test]
    fn the_cli_knows_which_flags_take_values() {
        let command = clap::Command::new("bnn").subcommand(
            clap::Command::new("run")
                .arg(
                    clap::Arg::new("step")
                        .long("step-size")
                        .visible_alias("eps"),
                )
                .arg(
                    clap::Arg::new("mile")
                        .long("mile")
                        .action(clap::ArgAction::SetTrue),
                ),
        );
        assert!(takes_value(&command, "step-size") && takes_value(&command, "eps"));
        assert!(!takes_value(&command, "mile") && !takes_value(&command, "no-such-flag"));
    }
}
