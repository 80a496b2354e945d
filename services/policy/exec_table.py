"""What the policy knows about programs: which ones can run arbitrary code, and with which
arguments.  Data only; ``services.policy.commands`` applies it.

A command that can execute code chosen by its arguments (inline code, a script, a config
override that names a program, a hook, a build recipe, a pager or editor shell escape) is
*exec-capable*: it needs the operator's approval in every approval mode, and neither
``commander`` nor an ``auto_approve`` rule lets it through.  The table is deliberately
conservative: an allowlisted program that is in none of these tables and not in ``INERT`` is
treated as exec-capable too (fail closed); a policy can name more inert programs with
``shell.inert_programs``.

Program names are looked up as given, then with a version suffix removed (``python3.12`` ->
``python``), and by the name of the file they resolve to.
"""

from __future__ import annotations

# Programs that run only themselves, whatever their arguments (as far as code execution goes;
# the paths they touch are still checked by the path rules).
INERT: frozenset[str] = frozenset(
    """
    ls dir vdir cat tac head tail wc grep egrep fgrep rg echo printf pwd true false sleep diff cmp
    uniq stat file du df date whoami id uname hostname basename dirname realpath readlink tree cut
    tr nl od hexdump xxd md5sum sha1sum sha256sum sha512sum b2sum cksum base64 base32 comm join
    paste fold fmt column rev seq ps which test expr touch mkdir rmdir cp mv rm ln chmod truncate
    tee jq yq wc printenv locale tput nproc free uptime
    """.split()
)

# Interpreters: exec-capable with any arguments (inline code, a module, a script, stdin),
# except a lone informational flag.
INTERPRETERS: frozenset[str] = frozenset(
    """
    python pypy node nodejs deno bun perl ruby irb php lua luajit tclsh wish Rscript R julia
    sh bash zsh dash ksh mksh csh tcsh fish ash busybox osascript powershell pwsh cmd java jshell
    groovy scala kotlin erl elixir iex guile racket sbcl clisp ocaml ghci runghc swift dotnet
    """.split()
)
INFO_FLAGS: frozenset[str] = frozenset({"--version", "-V", "--help", "-h", "-version"})

# Always exec-capable: they run a program, a recipe, a script or a shell by design.
ALWAYS: dict[str, str] = {
    **dict.fromkeys(["awk", "gawk", "mawk", "nawk", "busybox"], "runs the program text it is given"),
    **dict.fromkeys(
        ["xargs", "parallel", "watch", "flock", "setsid", "script", "taskset", "chrt", "ionice"], "runs a command"
    ),
    **dict.fromkeys(["sudo", "doas", "su", "pkexec", "runas", "chroot", "unshare", "nsenter"], "runs a command"),
    **dict.fromkeys(["strace", "ltrace", "gdb", "lldb", "valgrind", "expect"], "runs and controls a program"),
    **dict.fromkeys(["make", "gmake", "cmake", "ninja", "meson", "scons", "bazel"], "runs build recipes"),
    **dict.fromkeys(["gradle", "mvn", "ant", "rake", "sbt", "just", "task"], "runs build recipes"),
    **dict.fromkeys(["pytest", "py.test", "tox", "nox", "pre-commit"], "imports and runs project code"),
    **dict.fromkeys(["npx", "pnpx", "bunx", "uvx", "pipx"], "downloads and runs packages"),
    **dict.fromkeys(["poetry", "pipenv", "hatch", "pdm", "uv", "conda", "mamba"], "runs project scripts"),
    **dict.fromkeys(["less", "more", "most", "man", "pg", "journalctl"], "a pager with shell escapes"),
    **dict.fromkeys(
        ["vi", "vim", "nvim", "view", "ex", "ed", "emacs", "nano", "pico", "micro", "joe", "mg", "kak", "hx"],
        "an editor with shell escapes",
    ),
    **dict.fromkeys(["ssh", "scp", "sftp", "telnet", "nc", "ncat", "netcat", "socat"], "runs remote commands"),
    **dict.fromkeys(["crontab", "at", "batch", "systemd-run", "systemctl", "launchctl"], "schedules commands"),
}

# Wrappers that run their argument: the inner command is classified (and must be allowlisted).
# name -> (options that take a value, options without one, positional arguments before the
# command).  An option the table does not know makes the wrapper exec-capable.
WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str], int]] = {
    "nice": (frozenset({"-n", "--adjustment"}), frozenset(), 0),
    "nohup": (frozenset(), frozenset(), 0),
    "timeout": (
        frozenset({"-s", "--signal", "-k", "--kill-after"}),
        frozenset({"--preserve-status", "--foreground", "-v", "--verbose"}),
        1,
    ),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), frozenset(), 0),
    "time": (
        frozenset({"-f", "--format", "-o", "--output"}),
        frozenset({"-p", "--portability", "-v", "--verbose", "-a", "--append", "-q", "--quiet"}),
        0,
    ),
}

# Exec-capable when any argument is one of these options (``--opt``, ``--opt=value`` or, for
# single-letter options, glued or bundled forms).
EXEC_OPTIONS: dict[str, frozenset[str]] = {
    "find": frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}),
    "tar": frozenset(
        {
            "--to-command",
            "--use-compress-program",
            "-I",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
            "-F",
            "--rsh-command",
            "--rmt-command",
        }
    ),
    "rsync": frozenset({"-e", "--rsh", "--rsync-path"}),
    "sort": frozenset({"--compress-program"}),
    "zip": frozenset({"-TT", "--unzip-command"}),
    "sdiff": frozenset({"--diff-program"}),
    "diff3": frozenset({"--diff-program"}),
    "split": frozenset({"--filter"}),
    "env": frozenset(),  # handled in commands: only a bare ``env`` (print) is inert
}
# Programs in EXEC_OPTIONS whose arguments may name a remote host (``host:path``) and then run a
# remote shell.
REMOTE_SHELL: frozenset[str] = frozenset({"tar", "rsync"})

# Subcommand programs: only these subcommands are inert; every other one (including unknown
# ones, which may be aliases) is exec-capable.
SAFE_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "git": frozenset(
        """
        status log show diff blame annotate ls-files ls-tree rev-parse rev-list describe shortlog
        grep cat-file show-ref for-each-ref count-objects name-rev merge-base whatchanged
        var version check-ignore check-attr branch tag reflog
        """.split()
    ),
    "hg": frozenset("status log diff annotate cat files id identify summary root version heads tags".split()),
    "npm": frozenset("ls list ll la view info outdated --version -v".split()),
    "yarn": frozenset("list info why --version -v".split()),
    "pnpm": frozenset("list ls why --version -v".split()),
    "pip": frozenset("list show freeze check --version -V".split()),
    "cargo": frozenset("--version -V version tree --list".split()),
    "go": frozenset("version env doc".split()),
}
# Options of a subcommand that make even a safe subcommand exec-capable.
EXEC_SUBCOMMAND_OPTIONS: dict[str, frozenset[str]] = {
    "git": frozenset({"--ext-diff", "--textconv", "--open-files-in-pager", "-O", "--exec", "--upload-pack"}),
    "hg": frozenset({"--config", "--pager", "--debugger", "--tool"}),
}
# Global options (before the subcommand) that take a value.
GLOBAL_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "git": frozenset({"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds"}),
    "hg": frozenset({"-R", "--repository", "--cwd", "--encoding", "--encodingmode", "--color"}),
    "npm": frozenset({"--prefix", "-C"}),
    "yarn": frozenset({"--cwd"}),
    "pnpm": frozenset({"-C", "--dir"}),
    "cargo": frozenset({"-C", "--color"}),
}
# git ``-c key=value`` overrides that cannot run anything; every other key is exec-capable
# (core.pager, core.sshCommand, core.fsmonitor, core.hooksPath, alias.*, diff.external, ...).
GIT_SAFE_CONFIG_PREFIXES: tuple[str, ...] = (
    "color.",
    "core.quotepath",
    "core.abbrev",
    "log.",
    "i18n.",
    "user.name",
    "user.email",
    "column.",
    "status.",
)

# Environment variables a tool call may never set, even when ``shell.env_allow`` matches them:
# they make programs load or run code (or change where the policy's checks look).
EXEC_ENV_PREFIXES: tuple[str, ...] = (
    "LD_",
    "DYLD_",
    "ARIES_",
    "PYTHON",
    "NODE_",
    "NPM_CONFIG_",
    "PERL",
    "RUBY",
    "GEM_",
    "BASH_FUNC_",
    "GIT_",
    "LESS",
    "SSH_",
    "LUA_",
    "JAVA_",
    "_JAVA_",
    "CARGO_",
    "RUSTC",
    "PIP_",
    "MALLOC_",
    "GCONV_",
    "XDG_",
)
EXEC_ENV_NAMES: frozenset[str] = frozenset(
    """
    BASH_ENV ENV PROMPT_COMMAND PS4 SHELLOPTS BASHOPTS IFS ZDOTDIR EDITOR VISUAL PAGER MANPAGER
    BROWSER PATH HOME SHELL CLASSPATH GOFLAGS CC CXX CPP LDFLAGS MAKEFLAGS MAKEFILES TAR_OPTIONS
    TERMINFO HOSTALIASES RESOLV_HOST_CONF NLSPATH LOCPATH TMPDIR
    """.split()
)

# Safe default for ``shell.env_allow``: the names a tool call may set.
DEFAULT_ENV_ALLOW: tuple[str, ...] = (
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "COLUMNS",
    "LINES",
)
