"""Read a YAML mapping and turn pydantic errors into `file:line: key.path: message` lines."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from rubricrl.errors import ConfigError


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


def _line_of(root: yaml.Node | None, loc: tuple) -> int | None:
    node, line = root, None
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
    return line


def validation_error(err: ValidationError, data: dict, root: yaml.Node | None, path: Path) -> ConfigError:
    """One line per problem; list items with an `id` are named by it (criteria.faithfulness.weight)."""
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
        line = _line_of(root, loc)
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"{path}:{line}: " if line else f"{path}: ")
        lines[-1] += f"{'.'.join(names) or '(root)'}: {msg}"
    return ConfigError("\n".join(lines))
