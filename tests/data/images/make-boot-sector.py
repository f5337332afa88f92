#!/usr/bin/env python3
"""Write the bench's BIOS boot sector fixtures (hand-assembled 16-bit x86, no assembler).

boot-sector.img: a 1 MiB raw disk (SeaBIOS says "could not read the boot disk" of a disk
smaller than that, 512 bytes and 32 KiB tried) whose boot sector writes its message to COM1 (0x3f8)
byte by byte, writes itself over sector 1 through the BIOS and says whether that was
taken, then powers off through q35's ACPI PM1a control register (0x604, SLP_EN
with S5's type 0, the ICH9 PM base SeaBIOS programs), and halts if that did not end it.
boot-sector-zeroed.img: the same size, all zeros: no 0x55AA signature, so SeaBIOS finds
no bootable device. Run it from this folder; the files are committed. make-iso.sh puts
the same boot sector on a CD (boot-sector.iso).
"""
import struct

MESSAGE = b"\r\ntestbench-image: boot sector reached\r\n"
WRITTEN = b"testbench-image: sector 1 written\r\n"
NOT_WRITTEN = b"testbench-image: sector 1 not written\r\n"
ORIGIN = 0x7C00

def sector():
    """The boot sector: print MESSAGE; write itself over sector 1 (CHS 0/0/2) of the boot
    drive through the BIOS (int 13h, AH=03h: the bench's snapshot mode must keep the
    file as it was) and say whether the BIOS took the write; power off."""
    code = bytearray()
    fixups = []  # (offset of a 16-bit immediate, name of the string)
    calls = []   # offset of a call's rel16
    def mov_si(name):
        fixups.append((len(code) + 1, name))
        code.extend(b"\xBE\x00\x00")  # mov si, imm16
    def call_print():
        calls.append(len(code) + 1)
        code.extend(b"\xE8\x00\x00")  # call rel16
    code += b"\xFA"                      # cli
    code += b"\x31\xC0"                  # xor ax, ax
    code += b"\x8E\xD8"                  # mov ds, ax
    code += b"\x8E\xC0"                  # mov es, ax
    code += b"\x8E\xD0"                  # mov ss, ax
    code += b"\xBC\x00\x7C"              # mov sp, 0x7c00
    code += b"\xFB"                      # sti
    code += b"\xFC"                      # cld
    code += b"\x52"                      # push dx (DL: the boot drive)
    mov_si("message")
    call_print()
    code += b"\x5A"                      # pop dx
    code += b"\xB8\x01\x03"              # mov ax, 0x0301 (write one sector)
    code += b"\xB9\x02\x00"              # mov cx, 0x0002 (cylinder 0, sector 2)
    code += b"\x30\xF6"                  # xor dh, dh (head 0)
    code += b"\xBB\x00\x7C"              # mov bx, 0x7c00 (es:bx: this sector)
    code += b"\xCD\x13"                  # int 0x13
    mov_si("not_written")
    code += b"\x72\x03"                  # jc +3 (the BIOS refused: keep that line)
    mov_si("written")
    call_print()
    code += b"\xBA\x04\x06"              # mov dx, 0x604
    code += b"\xB8\x00\x20"              # mov ax, 0x2000 (SLP_EN, SLP_TYP 0: S5 on q35)
    code += b"\xEF"                      # out dx, ax
    halt = len(code)
    code += b"\xF4"                      # hlt
    code += bytes([0xEB, (halt - (len(code) + 2)) & 0xFF])  # jmp halt
    print_at = len(code)
    code += b"\xBA\xF8\x03"              # print: mov dx, 0x3f8
    loop = len(code)
    code += b"\xAC"                      # lodsb
    code += b"\x84\xC0"                  # test al, al
    code += b"\x74\x03"                  # jz +3 (past out and jmp)
    code += b"\xEE"                      # out dx, al
    code += bytes([0xEB, (loop - (len(code) + 2)) & 0xFF])  # jmp loop
    code += b"\xC3"                      # ret
    for at in calls:
        struct.pack_into("<h", code, at, print_at - (at + 2))
    strings = {}
    for name, text in [("message", MESSAGE), ("written", WRITTEN), ("not_written", NOT_WRITTEN)]:
        strings[name] = ORIGIN + len(code)
        code += text + b"\x00"
    for at, name in fixups:
        struct.pack_into("<H", code, at, strings[name])
    assert len(code) <= 510, len(code)
    return bytes(code) + bytes(510 - len(code)) + b"\x55\xAA"

DISK_BYTES = 1024 * 1024

with open("boot-sector.img", "wb") as f:
    f.write(sector() + bytes(DISK_BYTES - 512))
with open("boot-sector-zeroed.img", "wb") as f:
    f.write(bytes(DISK_BYTES))
