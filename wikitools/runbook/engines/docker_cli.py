"""Docker and Compose command-line facts, as data: which programs run containers, which of their
options take a value, which say "detached", "remove", "environment", and what their output says
when a container never started. The launcher readers (`launch_containers`, `compose`,
`launcher`, `shell`) and the executor read these tables; none names a Docker flag itself."""

from __future__ import annotations

# Programs with the `docker run` / `docker exec` command line.
CONTAINER_PROGRAMS = ("docker", "podman", "nerdctl")
# Programs that take `compose` as a subcommand; and the stand-alone Compose 1.x program.
COMPOSE_HOSTS = ("docker", "podman")
COMPOSE_PROGRAM = "docker-compose"

# docker run options that take a value (long names without '='; short ones)
RUN_VALUE_FLAGS = frozenset({
    "-e", "--env", "-v", "--volume", "-p", "--publish", "--gpus", "--ipc", "--shm-size", "--name",
    "--network", "--net", "--entrypoint", "-w", "--workdir", "-u", "--user", "--ulimit",
    "--runtime", "--env-file", "--mount", "-l", "--label", "--cpus", "--cpuset-cpus", "-m",
    "--memory", "--device", "--add-host", "--cap-add", "--cap-drop", "--security-opt",
    "--restart", "--platform", "--pull", "--pid", "--hostname", "-h", "--log-driver", "--log-opt",
    "--memory-swap", "--group-add", "--stop-signal", "--stop-timeout", "--tmpfs", "--dns",
    "--cgroupns", "--uts", "--userns", "--health-cmd", "--gpus-all", "--cidfile",
    "--volumes-from", "--link", "--mac-address", "--ip", "--expose", "--label-file",
    "--cpuset-mems", "--cpu-shares", "--memory-reservation", "--oom-score-adj",
})
RUN_BOOL_SHORT = frozenset("dit")  # -d -i -t and combinations (-it, -dit)
RUN_VALUE_SHORT = "evpwuml"  # short options with a value that may end a combination (-itv X)
# docker exec / compose exec options that take a value
EXEC_VALUE_FLAGS = frozenset({"-e", "--env", "-w", "--workdir", "-u", "--user", "--env-file",
                              "--detach-keys", "--index"})

ENV_FLAGS = ("-e", "--env")  # -e NAME=value, or bare -e NAME (the host's value)
DETACH_FLAGS = ("-d", "--detach")
REMOVE_FLAG = "--rm"
GPUS_FLAG = "--gpus"
ENTRYPOINT_FLAG = "--entrypoint"
NAME_FLAG = "--name"
PUBLISH_FLAGS = ("-p", "--publish")

# Compose: global options (before the subcommand) that take a value, and those of `up`.
COMPOSE_GLOBAL_VALUE_FLAGS = frozenset({
    "-f", "--file", "-p", "--project-name", "--env-file", "--project-directory", "--profile",
    "--ansi", "--parallel", "-H", "--host", "--context", "-c",
})
COMPOSE_UP_VALUE_FLAGS = frozenset({"-t", "--timeout", "--scale", "--exit-code-from", "--pull",
                                    "--wait-timeout", "--attach", "--no-attach"})
COMPOSE_FILE_FLAGS = ("-f", "--file")
COMPOSE_PROJECT_FLAGS = ("-p", "--project-name")
# Compose subcommands that start a service's command.
COMPOSE_START_SUBCOMMANDS = ("up", "run", "start", "create")

# docker / compose output lines that say why a container never started (added to an engine's
# fatal patterns when the server runs in a container).
FATAL_LOG = (
    r"Unable to find image ",
    r"^docker: Error response from daemon: ",
    r"^Error response from daemon: ",
    r"^ERROR: ",  # docker-compose 1.x
    r"^Error: No such ",
)
