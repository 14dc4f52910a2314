# Sourced by scripts/*: create .venv with the project and its test extra if missing.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.venomx-installed"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  "$venv/bin/python" -m pip install -q -e "$root[test]" --config-settings editable_mode=compat
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
