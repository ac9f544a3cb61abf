//! `jtap completions SHELL`: clap's completion script of jtap's commands and options; for
//! bash, also the names of a running JVM's classes and methods where `trace`, `monitor`,
//! `calltree`, `inspect` and `classes` take a pattern after the pid, asked of the JVM by
//! `jtap classes PID PREFIX* --names` as the user presses Tab (no agent is loaded).

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

/// Prints the script for `shell`.
pub fn run(shell: Shell, command: &mut clap::Command) -> anyhow::Result<i32> {
    let mut out = io::stdout().lock();
    clap_complete::generate(shell, command, "jtap", &mut out);
    if shell == Shell::Bash {
        out.write_all(BASH_NAMES.as_bytes())?;
    }
    Ok(0)
}
