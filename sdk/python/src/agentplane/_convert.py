"""Conversion between plain Python values and protobuf messages.

Struct and Value fields take and give dicts, lists, strings, numbers, booleans and
None; an enum field takes its value's name or number; every
other message field takes a dict of its fields (or the message itself),
recursively, so a request is written as plain data.
"""

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from google.protobuf import struct_pb2
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)
# A field descriptor (the upb one at run time; typed loosely, as both implementations are).
FieldDescriptor = Any

_STRUCT = "google.protobuf.Struct"
_VALUE = "google.protobuf.Value"
_LIST = "google.protobuf.ListValue"


def to_value(py: Any) -> struct_pb2.Value:
    """Returns a google.protobuf.Value holding the plain value py."""
    v = struct_pb2.Value()
    _set_value(v, py)
    return v


def _set_value(v: struct_pb2.Value, py: Any) -> None:
    if py is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(py, bool):
        v.bool_value = py
    elif isinstance(py, (int, float)):
        v.number_value = py
    elif isinstance(py, str):
        v.string_value = py
    elif isinstance(py, dict):
        v.struct_value.update(py)  # pyright: ignore[reportUnknownArgumentType]
    elif isinstance(py, (list, tuple)):
        v.list_value.extend(py)  # pyright: ignore[reportUnknownArgumentType]
    else:
        raise TypeError(f"cannot put a {type(py).__name__} in a google.protobuf.Value")


def from_struct(s: struct_pb2.Struct) -> dict[str, Any]:
    """Returns the dict a google.protobuf.Struct holds (numbers as float)."""
    return {k: from_value(v) for k, v in s.fields.items()}


def from_value(v: struct_pb2.Value) -> Any:
    """Returns the plain value a google.protobuf.Value holds (numbers as float)."""
    kind = v.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "struct_value":
        return from_struct(v.struct_value)
    if kind == "list_value":
        return [from_value(x) for x in v.list_value.values]
    return getattr(v, kind)


def fill(msg: M, fields: Mapping[str, Any]) -> M:
    """Sets the fields of msg from a dict; Struct/Value fields take plain values."""
    desc: Any = msg.DESCRIPTOR
    for name, py in fields.items():
        if py is None:
            continue
        fd = desc.fields_by_name.get(name)
        if fd is None:
            raise TypeError(f"{desc.full_name} has no field {name!r}")
        target: Any = getattr(msg, name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            items: Mapping[Any, Any] = py
            for k, item in items.items():
                if value_fd.message_type is None:
                    target[k] = item
                else:
                    _assign(target[k], item)
        elif fd.label == fd.LABEL_REPEATED:
            for item in py:
                if fd.message_type is None:
                    target.append(_enum(fd, item))
                else:
                    _assign(target.add(), item)
        elif fd.message_type is not None:
            _assign(target, py)
        else:
            setattr(msg, name, _enum(fd, py))
    return msg


def _enum(fd: FieldDescriptor, py: Any) -> Any:
    # An enum field also takes its value's name ("TASK_STATE_WORKING").
    if fd.enum_type is not None and isinstance(py, str):
        return fd.enum_type.values_by_name[py].number
    return py


def _assign(sub: Any, py: Any) -> None:
    name = sub.DESCRIPTOR.full_name
    if isinstance(py, Message):
        sub.CopyFrom(py)
    elif name == _STRUCT:
        sub.Clear()
        sub.update(py)
    elif name == _VALUE:
        _set_value(sub, py)
    elif name == _LIST:
        sub.extend(py)
    elif isinstance(py, dict):
        sub.SetInParent()  # an empty dict still sets the field (a oneof arm, presence)
        fill(sub, cast(Mapping[str, Any], py))
    else:
        # Well-known conversions: Duration from seconds, Timestamp from a datetime.
        if name == "google.protobuf.Duration" and isinstance(py, (int, float)):
            sub.FromNanoseconds(int(py * 1e9))
        elif name == "google.protobuf.Timestamp" and hasattr(py, "timestamp"):
            sub.FromDatetime(py)
        else:
            raise TypeError(f"cannot set a {name} from a {type(py).__name__}")


# Results: enum members, oneof variants, dicts.


def enum_of(msg: Message, field: str) -> Any:
    """The enum field of msg as its agentplane.enums member (an enum.IntEnum, equal to the
    int the message holds); a value the SDK does not know comes back as the int."""
    fd: FieldDescriptor = msg.DESCRIPTOR.fields_by_name[field]
    if fd.enum_type is None:
        raise TypeError(f"{msg.DESCRIPTOR.full_name}.{field} is not an enum field")
    return _member(fd, getattr(msg, field))


def _member(fd: FieldDescriptor, number: int) -> Any:
    from agentplane.enums import BY_PROTO_NAME

    cls = BY_PROTO_NAME.get(fd.enum_type.full_name) if fd.enum_type is not None else None
    if cls is None:
        return number
    try:
        return cls(number)
    except ValueError:
        return number


def py(msg: Message, field: str) -> Any:
    """The field of msg as plain Python: a Struct as a dict, a Value or ListValue as plain
    data, a Timestamp as an aware datetime, a Duration as a timedelta, an enum as its
    agentplane.enums member, a repeated field as a list and a map as a dict of those; a
    message field is the message itself (read its fields with py again), None when unset."""
    fd: FieldDescriptor = msg.DESCRIPTOR.fields_by_name[field]
    value: Any = getattr(msg, field)
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        vfd = fd.message_type.fields_by_name["value"]
        return {k: _plain(vfd, v) for k, v in value.items()}
    if fd.label == fd.LABEL_REPEATED:
        return [_plain(fd, v) for v in value]
    if fd.message_type is not None and not msg.HasField(field):
        return None
    return _plain(fd, value)


def _plain(fd: FieldDescriptor, value: Any) -> Any:
    if fd.enum_type is not None:
        return _member(fd, value)
    if fd.message_type is None:
        return value
    name = fd.message_type.full_name
    if name == _STRUCT:
        return from_struct(value)
    if name == _VALUE:
        return from_value(value)
    if name == _LIST:
        return [from_value(x) for x in value.values]
    if name == "google.protobuf.Timestamp":
        import datetime

        return value.ToDatetime(tzinfo=datetime.timezone.utc)
    if name == "google.protobuf.Duration":
        return value.ToTimedelta()
    return value


class Variant:
    """The arm of a oneof that is set (variant()): name is the field's name, value its value
    as py() gives it (a message, an enum member, a dict for a Struct, a str, ...).

    Match on it: `case Variant("state_changed", StateChanged(to_state=s))`, or on the value
    alone (`match variant(ev, "payload").value`) where the arms' types differ."""

    __match_args__ = ("name", "value")
    __slots__ = ("name", "value")

    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"Variant({self.name!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Variant) and (self.name, self.value) == (other.name, other.value)

    def __hash__(self) -> int:
        return hash(self.name)


def variant(msg: Message, oneof: str) -> Variant | None:
    """The arm of msg's oneof that is set, as a Variant; None when none is."""
    name = msg.WhichOneof(oneof)
    if name is None:
        return None
    return Variant(name, py(msg, name))
