"""Conversion between plain Python values and protobuf messages.

Struct and Value fields take and give dicts, lists, strings, numbers, booleans and
None; an enum field takes its value's name or number; every
other message field takes a dict of its fields (or the message itself),
recursively, so a request is written as plain data.
"""

from google.protobuf import struct_pb2
from google.protobuf.message import Message

_STRUCT = "google.protobuf.Struct"
_VALUE = "google.protobuf.Value"
_LIST = "google.protobuf.ListValue"


def to_value(py):
    """Returns a google.protobuf.Value holding the plain value py."""
    v = struct_pb2.Value()
    _set_value(v, py)
    return v


def _set_value(v, py):
    if py is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(py, bool):
        v.bool_value = py
    elif isinstance(py, (int, float)):
        v.number_value = py
    elif isinstance(py, str):
        v.string_value = py
    elif isinstance(py, dict):
        v.struct_value.update(py)
    elif isinstance(py, (list, tuple)):
        v.list_value.extend(py)
    else:
        raise TypeError(f"cannot put a {type(py).__name__} in a google.protobuf.Value")


def from_struct(s):
    """Returns the dict a google.protobuf.Struct holds (numbers as float)."""
    return {k: from_value(v) for k, v in s.fields.items()}


def from_value(v):
    """Returns the plain value a google.protobuf.Value holds (numbers as float)."""
    kind = v.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "struct_value":
        return from_struct(v.struct_value)
    if kind == "list_value":
        return [from_value(x) for x in v.list_value.values]
    return getattr(v, kind)


def fill(msg, fields):
    """Sets the fields of msg from a dict; Struct/Value fields take plain values."""
    desc = msg.DESCRIPTOR
    for name, py in fields.items():
        if py is None:
            continue
        fd = desc.fields_by_name.get(name)
        if fd is None:
            raise TypeError(f"{desc.full_name} has no field {name!r}")
        target = getattr(msg, name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            for k, item in py.items():
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


def _enum(fd, py):
    # An enum field also takes its value's name ("TASK_STATE_WORKING").
    if fd.enum_type is not None and isinstance(py, str):
        return fd.enum_type.values_by_name[py].number
    return py


def _assign(sub, py):
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
        fill(sub, py)
    else:
        # Well-known conversions: Duration from seconds, Timestamp from a datetime.
        if name == "google.protobuf.Duration" and isinstance(py, (int, float)):
            sub.FromNanoseconds(int(py * 1e9))
        elif name == "google.protobuf.Timestamp" and hasattr(py, "timestamp"):
            sub.FromDatetime(py)
        else:
            raise TypeError(f"cannot set a {name} from a {type(py).__name__}")
