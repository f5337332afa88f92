#!/usr/bin/env python3
"""Write the bench's BIOS boot sector fixtures (hand-assembled 16-bit x86, no assembler).

boot-sector.img: a 1 MiB raw disk (SeaBIOS says "could not read the boot disk" of a disk
smaller than that, 512 bytes and 32 KiB tried) whose boot sector writes its message to COM1 (0x3f8)
byte by byte, then powers off through q35's ACPI PM1a control register (0x604, SLP_EN
with S5's type 0, the ICH9 PM base SeaBIOS programs), and halts if that did not end it.
boot-sector-zeroed.img: the same size, all zeros: no 0x55AA signature, so SeaBIOS finds
no bootable device. Run it from this folder; the files are committed. make-iso.sh puts
the same boot sector on a CD (boot-sector.iso).
"""
import struct

MESSAGE = b"\r\ntestbench-image: boot sector reached\r\n"
ORIGIN = 0x7C00

def sector(message):
    code = bytearray()
    code += b"\xFA"                      # cli
    code += b"\x31\xC0"                  # xor ax, ax
    code += b"\x8E\xD8"                  # mov ds, ax
    code += b"\xFC"                      # cld
    si_fixup = len(code) + 1
    code += b"\xBE\x00\x00"              # mov si, message (fixed up below)
    code += b"\xBA\xF8\x03"              # mov dx, 0x3f8
    loop = len(code)
    code += b"\xAC"                      # lodsb
    code += b"\x84\xC0"                  # test al, al
    code += b"\x74\x03"                  # jz +3 (past out and jmp)
    code += b"\xEE"                      # out dx, al
    code += bytes([0xEB, (loop - (len(code) + 2)) & 0xFF])  # jmp loop
    code += b"\xBA\x04\x06"              # mov dx, 0x604
    code += b"\xB8\x00\x20"              # mov ax, 0x2000 (SLP_EN, SLP_TYP 0: S5 on q35)
    code += b"\xEF"                      # out dx, ax
    halt = len(code)
    code += b"\xF4"                      # hlt
    code += bytes([0xEB, (halt - (len(code) + 2)) & 0xFF])  # jmp halt
    struct.pack_into("<H", code, si_fixup, ORIGIN + len(code))
    code += message + b"\x00"
    assert len(code) <= 510, len(code)
    return bytes(code) + bytes(510 - len(code)) + b"\x55\xAA"

DISK_BYTES = 1024 * 1024

with open("boot-sector.img", "wb") as f:
    f.write(sector(MESSAGE) + bytes(DISK_BYTES - 512))
with open("boot-sector-zeroed.img", "wb") as f:
    f.write(bytes(DISK_BYTES))
