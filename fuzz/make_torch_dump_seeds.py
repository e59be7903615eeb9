#!/usr/bin/python3
"""Writes fuzz/seeds/torch_dump/: memo-heavy `.pt` dumps for fuzz_torch_dump (issue 54).

Each is a zip archive as torch.save writes it, with a pickle built opcode by opcode, because
Python's pickler never writes most of them (repeated dict keys, records recalled thousands of
times, tensors recalled by distinct records). Each stays under the fuzzer's 64 KiB -max_len.
Run once when a seed changes: ``/usr/bin/python3 fuzz/make_torch_dump_seeds.py``.
"""

import os
import struct
import zipfile

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "torch_dump")


def save(name, pickle, storages):
    os.makedirs(OUT, exist_ok=True)
    entries = [("d/data.pkl", pickle), ("d/byteorder", b"little"), ("d/version", b"3\n")]
    entries += [("d/data/" + key, data) for key, data in storages.items()]
    with zipfile.ZipFile(os.path.join(OUT, name + ".pt"), "w", zipfile.ZIP_STORED) as z:
        for entry, data in entries:  # a fixed date, so that the seeds are written byte for byte
            z.writestr(zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0)), data)


def short(s):
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b


def i32(v):
    return b"J" + struct.pack("<i", v)


def put(n):
    return b"r" + struct.pack("<I", n)


def get(n):
    return b"j" + struct.pack("<I", n)


def ints(values):
    return b"(" + b"".join(i32(v) for v in values) + b"t"


def tensor(key, storage_type, numel, shape, stride, offset=0):
    return (b"ctorch._utils\n_rebuild_tensor_v2\n((" + short("storage") + b"ctorch\n" +
            storage_type.encode() + b"\n" + short(key) + short("cpu") + i32(numel) + b"tQ" +
            i32(offset) + ints(shape) + ints(stride) + b"\x89}tR")


def longs(values):
    return struct.pack("<%dq" % len(values), *values)


MAP = short("last_physical_to_logical_map") + tensor("m", "LongStorage", 4, (1, 4), (4, 1))


def main():
    # One record recalled 5,000 times, its counts a [1, 4] view of a larger storage.
    save("one_record_recalled",
         b"\x80\x02}(" + MAP + short("records") + b"](}(" + short("forward_pass_id") + i32(0) +
         short("global_physical_count") + tensor("big", "LongStorage", 2048, (1, 4), (4, 1)) +
         b"u" + put(0) + get(0) * 4999 + b"eu.",
         {"m": longs([0, 1, 0, 1]), "big": longs([3, 0, 5, 1] + [0] * 2044)})
    # One record whose forward_pass_id is set 3,000 times, recalled 1,000 times.
    save("repeated_keys",
         b"\x80\x02}(" + MAP + short("records") + b"](}" + short("forward_pass_id") + put(1) +
         i32(0) + put(2) + b"s" + short("global_physical_count") +
         tensor("c", "LongStorage", 4, (1, 4), (4, 1)) + b"s(" + (get(1) + get(2)) * 3000 +
         b"u" + put(0) + get(0) * 999 + b"eu.",
         {"m": longs([0, 1, 2, 3]), "c": longs([1, 2, 3, 4])})
    # 64 records, each its own view of one row of one storage.
    rows = b""
    for i in range(64):
        rows += (b"}(" + short("forward_pass_id") + i32(i) + short("global_physical_count") +
                 tensor("rows", "LongStorage", 256, (1, 4), (4, 1), offset=4 * i) + b"u")
    save("views_of_one_storage", b"\x80\x02}(" + MAP + short("records") + b"](" + rows + b"eu.",
         {"m": longs([0, 1, 2, 3]), "rows": longs(list(range(256)))})
    # 1,200 distinct records recalling one tensor of 16,384 counts: over the work budget.
    slots = 16384
    records = b""
    for i in range(1200):
        first = i == 0  # the keys and the tensor set once, then recalled from the memo
        records += (b"}(" + (short("forward_pass_id") + put(2) if first else get(2)) + i32(i) +
                    (short("global_physical_count") + put(3) if first else get(3)) +
                    (tensor("c", "CharStorage", slots, (1, slots), (slots, 1)) + put(1)
                     if first else get(1)) + b"u")
    save("over_budget",
         b"\x80\x02}(" + short("last_physical_to_logical_map") +
         tensor("m", "CharStorage", slots, (1, slots), (slots, 1)) + short("records") + b"](" +
         records + b"eu.",
         {"m": bytes(i % 16 for i in range(slots)), "c": bytes([1]) * slots})
    # vLLM's window with a negative count beside a positive replica of the same expert.
    save("vllm_negative_replica",
         b"\x80\x02}(" + short("expert_load_window") +
         tensor("w", "DoubleStorage", 4, (1, 1, 4), (4, 4, 1)) + short("physical_to_logical_map") +
         tensor("m", "LongStorage", 4, (1, 4), (4, 1)) + b"u.",
         {"w": struct.pack("<4d", -7, 0, 10, 0), "m": longs([0, 1, 0, 1])})


if __name__ == "__main__":
    main()
