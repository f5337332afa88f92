#!/usr/bin/env python3
"""Write uefi-esp.img: a FAT file system (no partition table: OVMF and AAVMF mount it
whole) whose removable-media paths \\EFI\\BOOT\\BOOTX64.EFI (OVMF's) and BOOTAA64.EFI
(AAVMF's) are tiny UEFI applications written here byte by byte (PE32+ images,
hand-assembled, no toolchain). On x86_64:

    sub rsp, 40                  ; the MS ABI's shadow space, the stack 16-byte aligned
    mov rbx, rdx                 ; the system table
    mov rcx, [rdx + 0x40]        ; its ConOut
    lea rdx, [rip + message]     ; a UTF-16 string
    call [rcx + 0x08]            ; ConOut->OutputString(ConOut, message)
    mov rax, [rbx + 0x58]        ; the runtime services
    mov ecx, 2                   ; EfiResetShutdown
    xor edx, edx                 ; EFI_SUCCESS
    xor r8d, r8d                 ; no data
    xor r9d, r9d
    call [rax + 0x68]            ; RuntimeServices->ResetSystem: ACPI S5, a power-off
    jmp $                        ; never reached

On aarch64 the same steps (x0, x1 the arguments; x19 keeps the system table; adr the
message; blr the calls; b . at the end). The code is position-independent (RIP- and
PC-relative), so neither image needs relocations.
Needs mkfs.fat (dosfstools) and mcopy (mtools); the image is committed.
"""
import os
import struct
import subprocess
import tempfile

MESSAGE = "\r\ntestbench-uefi: efi application reached\r\n"

def code_x86_64():
    body = bytearray()
    body += b"\x48\x83\xEC\x28"          # sub rsp, 40
    body += b"\x48\x89\xD3"              # mov rbx, rdx
    body += b"\x48\x8B\x4A\x40"          # mov rcx, [rdx+0x40]
    lea = len(body)
    body += b"\x48\x8D\x15\x00\x00\x00\x00"  # lea rdx, [rip+rel32]
    body += b"\xFF\x51\x08"              # call [rcx+8]
    body += b"\x48\x8B\x43\x58"          # mov rax, [rbx+0x58]
    body += b"\xB9\x02\x00\x00\x00"      # mov ecx, 2
    body += b"\x31\xD2"                  # xor edx, edx
    body += b"\x45\x31\xC0"              # xor r8d, r8d
    body += b"\x45\x31\xC9"              # xor r9d, r9d
    body += b"\xFF\x50\x68"              # call [rax+0x68]
    body += b"\xEB\xFE"                  # jmp $
    while len(body) % 2:
        body += b"\x90"
    message_at = len(body)
    struct.pack_into("<i", body, lea + 3, message_at - (lea + 7))
    body += (MESSAGE + "\0").encode("utf-16-le")
    return bytes(body)

def code_aarch64():
    words = [
        0xAA0103F3,  # mov x19, x1 (the system table)
        0xF9402020,  # ldr x0, [x1, #0x40] (ConOut)
        0xF9400408,  # ldr x8, [x0, #8] (OutputString)
        None,        # adr x1, message
        0xD63F0100,  # blr x8
        0xF9402E68,  # ldr x8, [x19, #0x58] (the runtime services)
        0xF9403508,  # ldr x8, [x8, #0x68] (ResetSystem)
        0xD2800040,  # mov x0, #2 (EfiResetShutdown)
        0xD2800001,  # mov x1, #0 (EFI_SUCCESS)
        0xD2800002,  # mov x2, #0 (no data)
        0xD2800003,  # mov x3, #0
        0xD63F0100,  # blr x8
        0x14000000,  # b . (never reached)
    ]
    adr = 3
    offset = (len(words) - adr) * 4
    words[adr] = 0x10000000 | ((offset & 3) << 29) | (((offset >> 2) & 0x7FFFF) << 5) | 1
    return b"".join(struct.pack("<I", w) for w in words) + (MESSAGE + "\0").encode("utf-16-le")

def pe(text, machine):
    file_align, section_align = 0x200, 0x1000
    raw_size = (len(text) + file_align - 1) // file_align * file_align
    dos = bytearray(0x40)
    dos[0:2] = b"MZ"
    struct.pack_into("<I", dos, 0x3C, 0x40)
    coff = struct.pack("<HHIIIHH", machine, 1, 0, 0, 0, 240, 0x0022)
    optional = bytearray(240)
    struct.pack_into("<HBBIIIII", optional, 0, 0x20B, 0, 0, raw_size, 0, 0, 0x1000, 0x1000)
    struct.pack_into("<QII", optional, 24, 0x400000, section_align, file_align)
    struct.pack_into("<II", optional, 56, 0x2000, file_align)  # SizeOfImage, SizeOfHeaders
    struct.pack_into("<HH", optional, 68, 10, 0)  # EFI application
    struct.pack_into("<QQQQ", optional, 72, 0x10000, 0x10000, 0x10000, 0x10000)
    struct.pack_into("<II", optional, 104, 0, 16)
    section = struct.pack("<8sIIIIIIHHI", b".text", len(text), 0x1000, raw_size, file_align, 0, 0, 0, 0, 0x60000020)
    headers = bytes(dos) + b"PE\0\0" + coff + bytes(optional) + section
    assert len(headers) <= file_align
    return headers + bytes(file_align - len(headers)) + text + bytes(raw_size - len(text))

here = os.path.dirname(os.path.abspath(__file__))
image = os.path.join(here, "uefi-esp.img")
with tempfile.TemporaryDirectory() as tmp:
    apps = []
    for name, machine, text in [("BOOTX64.EFI", 0x8664, code_x86_64()), ("BOOTAA64.EFI", 0xAA64, code_aarch64())]:
        app = os.path.join(tmp, name)
        with open(app, "wb") as f:
            f.write(pe(text, machine))
        os.utime(app, (1700000000, 1700000000))  # the same file dates every time
        apps.append((app, name))
    if os.path.exists(image):
        os.remove(image)
    subprocess.run(["mkfs.fat", "-C", "-i", "7e57be9c", "-n", "TESTBENCH", image, "2048"], check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    for folder in ["::/EFI", "::/EFI/BOOT"]:
        subprocess.run(["mmd", "-i", image, folder], check=True, env=env)
    for app, name in apps:
        subprocess.run(["mcopy", "-m", "-i", image, app, "::/EFI/BOOT/" + name], check=True, env=env)
