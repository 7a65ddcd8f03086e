"""Read a YAML mapping and turn pydantic errors into `file:line: key.path: message` lines."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from rubricrl.core.errors import ConfigError


class Strict(BaseModel):
    """The base of every settings and rubric model: unknown keys and non-finite numbers are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (plain YAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: let the base class report it
                continue
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (first at line {first})", key_node.start_mark)
        return super().construct_mapping(node, deep)


def read_mapping(path: Path, what: str) -> tuple[dict, yaml.Node | None]:
    """The parsed mapping and its node tree (for line numbers); ConfigError naming the file otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=_UniqueKeyLoader)
        data = _UniqueKeyLoader(text).get_single_data() if root is not None else None
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a {what} file") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the {what} file: {err.strerror}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(err, 'problem', err)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} file must be a YAML mapping")
    return data, root


def locate(root: yaml.Node | None, loc: tuple) -> tuple[int | None, int]:
    """(line of the deepest part of `loc` written in the tree, how many parts of it were found)."""
    node, line, depth = root, None, 0
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
        depth += 1
    return line, depth


def validation_error(err: ValidationError, data: dict, root, path: Path | None = None) -> ConfigError:
    """One line per problem; list items with an `id` are named by it (criteria.faithfulness.weight).

    `root` is the YAML node tree of `path`, or a list of (path, root) pairs, the files `data` was merged from
    (params.yaml, then overlays): each problem names the file that writes most of its key, the later on a tie."""
    sources = [(path, root)] if path is not None else list(root)
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not str(p).startswith("function-"))
        names, node = [], data
        for part in loc:
            if isinstance(part, int) and isinstance(node, list) and part < len(node) \
                    and isinstance(node[part], dict) and "id" in node[part]:
                names.append(str(node[part]["id"]))
            else:
                names.append(str(part))
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                node = None
        located = [(p, *locate(r, loc)) for p, r in sources]
        best = max(depth for _, _, depth in located)
        where, line, _ = next(s for s in reversed(located) if s[2] == best)
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{where}:{line}: " if line else f"{where}: ")
        lines[-1] += f"{'.'.join(names) or '(root)'}: {msg}"
    return ConfigError("\n".join(lines))
