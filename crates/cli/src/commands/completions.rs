//! `jtap completions SHELL`: clap's completion script of jtap's commands and options; for
//! bash, zsh and fish, also the names of a running JVM's classes and methods where `trace`,
//! `monitor`, `calltree`, `inspect` and `classes` take a pattern after the pid, asked of the
//! JVM by `jtap classes PID PREFIX* --names` as the user presses Tab (no agent is loaded).

use std::io::{self, Write};

use clap_complete::Shell;

/// Bash: completes a class (`com.acme.Ca` → `com.acme.Cache`) or, after `::`, a method of
/// it, from the JVM whose pid is the command's first argument, else falls back to clap's
/// completion. The word is read up to the cursor from `COMP_LINE` (bash splits words at
/// `:`), and the part before the last `:` is taken off the candidates, as bash-completion's
/// `__ltrim_colon_completions` does.
const BASH_NAMES: &str = r#"
_jtap_jvm_names() {
    local command=${COMP_WORDS[1]} pid=${COMP_WORDS[2]} line=${COMP_LINE:0:COMP_POINT}
    local current=${line##*[[:space:]]} names
    case $command in trace|monitor|calltree|inspect|classes) ;; *) return 1 ;; esac
    [[ $pid =~ ^[0-9]+$ && $line =~ [[:space:]]$pid[[:space:]] && $current != -* ]] || return 1
    if [[ $current == *::* ]]; then
        names=$(jtap classes "$pid" "${current%%::*}" --methods --names 2>/dev/null)
    else
        names=$(jtap classes "$pid" "$current*" --names -n 200 2>/dev/null)
    fi
    local IFS=$'\n'
    COMPREPLY=($(compgen -W "$names" -- "$current"))
    if [[ $current == *:* ]]; then
        local colon=${current%"${current##*:}"}
        COMPREPLY=("${COMPREPLY[@]#"$colon"}")
    fi
    return 0
}
_jtap_with_jvm_names() {
    _jtap_jvm_names || _jtap "$@"
}
complete -F _jtap_with_jvm_names -o nosort -o bashdefault -o default jtap
"#;

/// Zsh: the same as bash's, through `compadd` (zsh keeps `::` inside one word), in front of
/// clap's `_jtap`.
const ZSH_NAMES: &str = r#"
_jtap_jvm_names() {
    local command=${words[2]} pid=${words[3]} current=$PREFIX
    [[ $command == (trace|monitor|calltree|inspect|classes) && $pid == <-> ]] || return 1
    (( CURRENT > 3 )) && [[ $current != -* ]] || return 1
    local -a names suffix
    if [[ $current == *::* ]]; then
        names=(${(f)"$(jtap classes $pid ${current%%::*} --methods --names 2>/dev/null)"})
    else
        # No space after a class: `::method` may follow.
        names=(${(f)"$(jtap classes $pid "$current*" --names -n 200 2>/dev/null)"})
        suffix=(-S '')
    fi
    (( ${#names} )) || return 1
    compadd -Q "${suffix[@]}" -- $names
}
_jtap_with_jvm_names() {
    _jtap_jvm_names || _jtap "$@"
}
compdef _jtap_with_jvm_names jtap
"#;

/// Fish: the names as candidates of an argument after the pid of those commands (fish
/// offers them beside clap's option candidates and filters them by what was typed); no
/// file names there.
const FISH_NAMES: &str = r#"
function __jtap_jvm_names_wanted
    set -l tokens (commandline -opc)
    contains -- "$tokens[2]" trace monitor calltree inspect classes
    and string match -qr '^[0-9]+$' -- "$tokens[3]"
    and not string match -q -- '-*' (commandline -ct)
end
function __jtap_jvm_names
    set -l pid (commandline -opc)[3]
    set -l current (commandline -ct)
    if string match -q -- '*::*' "$current"
        jtap classes $pid (string split -m1 -- '::' "$current")[1] --methods --names 2>/dev/null
    else
        jtap classes $pid "$current*" --names -n 200 2>/dev/null
    end
end
complete -c jtap -n __jtap_jvm_names_wanted -f -a '(__jtap_jvm_names)'
"#;

/// Prints the script for `shell`.
pub fn run(shell: Shell, command: &mut clap::Command) -> anyhow::Result<i32> {
    let mut out = io::stdout().lock();
    clap_complete::generate(shell, command, "jtap", &mut out);
    let names = match shell {
        Shell::Bash => BASH_NAMES,
        Shell::Zsh => ZSH_NAMES,
        Shell::Fish => FISH_NAMES,
        _ => "",
    };
    out.write_all(names.as_bytes())?;
    Ok(0)
}
