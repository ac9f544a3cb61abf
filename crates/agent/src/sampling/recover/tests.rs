//! The recovery rules on fake code and fake stacks.
use super::*;

#[test]
fn stub_ranges_merge_and_answer_by_kind() {
    let table = Table::new();
    table.add_stub(0x1000, 0x2000, StubKind::Other);
    table.add_stub(0x1100, 0x1120, StubKind::Frameless);
    table.add_stub(0x1140, 0x1160, StubKind::Frameless); // merges with the previous stub
    table.add_stub(0x1800, 0x1900, StubKind::Framed);
    table.add_stub(0x1900, 0x1980, StubKind::Framed); // framed stubs keep their ranges
    assert_eq!(table.len.load(Ordering::Relaxed), 4);
    assert_eq!(table.innermost(0x1950), Some((0x1900, StubKind::Framed)));
    assert_eq!(table.kind_at(0x1150), Some(StubKind::Frameless));
    assert_eq!(table.kind_at(0x1850), Some(StubKind::Framed));
    assert_eq!(table.kind_at(0x1a00), Some(StubKind::Other));
    assert_eq!(table.kind_at(0x3000), None);
    // The three safepoint handlers keep their ranges: each one's first instruction counts.
    for start in [0x3000, 0x3080, 0x3100] {
        table.add_stub(start, start + 0x80, StubKind::SafepointHandler);
    }
    assert_eq!(table.len.load(Ordering::Relaxed), 7);
    assert!(table.is_safepoint_handler_entry(0x3080));
    assert!(!table.is_safepoint_handler_entry(0x3081));
    assert!(!table.is_safepoint_handler_entry(0x1800));
    table.note_code(0x5000, 0x6000);
    assert!(table.in_code(0x5fff) && table.in_code(0x1000) && !table.in_code(0x6000));
    assert!(table.in_nmethod(0x5000) && !table.in_nmethod(0x1a00));
}

#[test]
fn stubs_are_told_apart_by_name_and_first_instructions() {
    let enter = [0x55, 0x48, 0x89, 0xe5];
    assert_eq!(StubKind::of("itable stub", &enter), StubKind::Frameless);
    assert_eq!(StubKind::of("I2C/C2I adapters", &enter), StubKind::Adapter);
    assert_eq!(
        StubKind::of("jlong_disjoint_arraycopy", &enter),
        StubKind::Framed
    );
    assert_eq!(
        StubKind::of("g1_post_barrier_slow", &[0x55, 0x48, 0x8b, 0xec]),
        StubKind::Framed
    );
    // mov r11, rdx; push rbp; mov rbp, rsp (JDK 25's arrayof_jbyte_fill)
    let fill = [0x49, 0x89, 0xd3, 0x55, 0x48, 0x89, 0xe5, 0x66];
    assert_eq!(StubKind::of("arrayof_jbyte_fill", &fill), StubKind::Framed);
    assert_eq!(StubKind::of("Interpreter", &[0x48, 0x8b]), StubKind::Other);
    assert_eq!(
        StubKind::of("SafepointBlob", &[0x53, 0x55]),
        StubKind::SafepointHandler
    );
    assert_eq!(StubKind::of("call_stub", &[0x55]), StubKind::Other);
    // A move from memory (mod 00) is no register move.
    let load = [0x49, 0x8b, 0x13, 0x55, 0x48, 0x89, 0xe5];
    assert_eq!(StubKind::of("some_stub", &load), StubKind::Other);
}

#[test]
fn a_stub_that_moves_a_register_before_its_frame_resumes_from_sp_there() {
    // mov r11, rdx; push rbp; mov rbp, rsp; leave; ret
    let code = FakeCode::new(&[0x49, 0x89, 0xd3, 0x55, 0x48, 0x89, 0xe5, 0xc9, 0xc3]);
    let mut words = FakeStack::new();
    words.0[10] = 0x7000;
    let stack = words.stack(10);
    let regs = |pc: usize| Interrupted {
        pc: code.pc(pc),
        sp: words.at(10),
        fp: words.at(30),
        r13: 0,
        rax: 0,
    };
    let resume = Some(Resume {
        pc: 0x7000,
        sp: words.at(11),
        fp: None,
    });
    assert_eq!(framed_stub(&stack, &regs(0)), resume);
    assert_eq!(framed_stub(&stack, &regs(3)), resume);
}

/// A fake thread stack of 64 words whose word `i` is `words(i)`, read as `Stack`.
struct FakeStack(Vec<usize>);

impl FakeStack {
    fn new() -> FakeStack {
        FakeStack(vec![0; 64])
    }
    fn at(&self, i: usize) -> usize {
        self.0.as_ptr() as usize + i * 8
    }
    fn stack(&self, sp_word: usize) -> Stack {
        Stack {
            sp: self.at(sp_word),
            high: self.at(self.0.len()),
            known: true,
        }
    }
}

/// `code` in a page-aligned buffer; the address of its byte `i` by `pc(i)`.
struct FakeCode(Vec<u8>, usize);

impl FakeCode {
    fn new(code: &[u8]) -> FakeCode {
        let mut page = vec![0xccu8; 3 * 4096];
        let base = (page.as_ptr() as usize + 4095) & !4095;
        let start = base + 64 - page.as_ptr() as usize;
        page[start..start + code.len()].copy_from_slice(code);
        FakeCode(page, start)
    }
    fn pc(&self, i: usize) -> usize {
        self.0.as_ptr() as usize + self.1 + i
    }
}

#[test]
fn framed_stubs_resume_from_the_frame_pointer_or_near_sp_at_their_edges() {
    // push rbp; mov rbp, rsp; mov eax, ecx; leave; ret
    let code = FakeCode::new(&[0x55, 0x48, 0x89, 0xe5, 0x89, 0xc8, 0xc9, 0xc3]);
    let mut words = FakeStack::new();
    words.0[10] = 0x7000; // return address at [sp] before push rbp, and at the ret
    words.0[20] = words.at(40); // saved rbp
    words.0[21] = 0x7100; // return address above it
    let regs = |pc: usize, sp: usize, fp: usize| Interrupted {
        pc: code.pc(pc),
        sp: words.at(sp),
        fp: words.at(fp),
        r13: 0,
        rax: 0,
    };
    let resume = |pc: usize, sp: usize, fp: Option<usize>| Resume {
        pc,
        sp: words.at(sp),
        fp: fp.map(|w| words.at(w)),
    };
    let stack = words.stack(10);
    assert_eq!(
        framed_stub(&stack, &regs(0, 10, 30)),
        Some(resume(0x7000, 11, None))
    );
    // At `mov rbp, rsp`, one word above the pushed rbp.
    assert_eq!(
        framed_stub(&words.stack(9), &regs(1, 9, 30)),
        Some(resume(0x7000, 11, None))
    );
    assert_eq!(
        framed_stub(&stack, &regs(7, 10, 30)),
        Some(resume(0x7000, 11, None))
    );
    let deep = words.stack(5);
    assert_eq!(
        framed_stub(&deep, &regs(4, 5, 20)),
        Some(resume(0x7100, 22, Some(40)))
    );
    // A frame pointer below sp is no frame.
    assert_eq!(framed_stub(&deep, &regs(4, 5, 2)), None);
}

#[test]
fn a_stub_using_rbp_as_data_resumes_where_it_was_called() {
    // One page of code: the stub at 64..128 after another framed stub at 0..64, an nmethod
    // after them calling the stub at 200 (`call rel32` to byte 64), the stub before it at 250
    // and something else at 300.
    let mut bytes = vec![0x90; 4096];
    let call = |bytes: &mut Vec<u8>, at: usize, target: usize| {
        let rel = (target as i64 - (at as i64 + 5)) as i32;
        bytes[at] = 0xe8;
        bytes[at + 1..at + 5].copy_from_slice(&rel.to_le_bytes());
    };
    call(&mut bytes, 200, 64);
    call(&mut bytes, 250, 0);
    call(&mut bytes, 300, 1000);
    let mut code = FakeCode::new(&bytes);
    // At 400: `mov r10, <stub + 16>; call r10`, as C2 calls runtime stubs.
    let stub_entry = (code.pc(64 + 16) as u64).to_le_bytes();
    code.0[code.1 + 400..code.1 + 402].copy_from_slice(&[0x49, 0xba]);
    code.0[code.1 + 402..code.1 + 410].copy_from_slice(&stub_entry);
    code.0[code.1 + 410..code.1 + 413].copy_from_slice(&[0x41, 0xff, 0xd2]);
    let table = Table::new();
    table.note_code(code.pc(0), code.pc(4096));
    table.add_stub(code.pc(0), code.pc(64), StubKind::Framed);
    table.add_stub(code.pc(64), code.pc(128), StubKind::Framed);
    let mut words = FakeStack::new();
    words.0[4] = 0x1234_5678; // data
    words.0[5] = code.pc(305); // a stale return address, after a call of something else
    words.0[7] = code.pc(255); // another, after a call of the stub before
    words.0[6] = words.at(50); // a saved stack pointer
    words.0[12] = code.pc(205); // the return address after the call of the stub
    let at = Interrupted {
        pc: code.pc(64 + 40),
        sp: words.at(4),
        fp: 0x1234,
        r13: 0,
        rax: 0,
    };
    assert_eq!(
        return_address_above(&table, &words.stack(4), &at),
        Some(Resume {
            pc: code.pc(205),
            sp: words.at(13),
            fp: None,
        })
    );
    words.0[12] = code.pc(413);
    assert_eq!(
        return_address_above(&table, &words.stack(4), &at).map(|r| r.pc),
        Some(code.pc(413))
    );
    words.0[12] = 0;
    assert_eq!(return_address_above(&table, &words.stack(4), &at), None);
}

#[test]
fn leaf_native_calls_resume_where_libjvm_returns_into_generated_code() {
    let table = Table::new();
    table.set_vm_library(0x100000, 0x200000);
    table.note_code(0x40000, 0x50000);
    // A framed stub's body (nops), read at the return address into it.
    let stub = FakeCode::new(&[0x90; 64]);
    table.add_stub(stub.pc(0), stub.pc(64), StubKind::Framed);
    let mut words = FakeStack::new();
    // libjvm's frames at words 10 and 20 (records: saved rbp, return address), the outer
    // one returning into an nmethod; libc's frame below them keeps no frame pointer.
    words.0[10] = words.at(20);
    words.0[11] = 0x100500;
    words.0[20] = words.at(40);
    words.0[21] = 0x40100;
    let (sp, record, outer) = (words.at(4), words.at(10), words.at(40));
    let at = |fp: usize| Interrupted {
        pc: 0x7f00_0000,
        sp,
        fp,
        r13: 0,
        rax: 0,
    };
    let expected = Some(Resume {
        pc: 0x40100,
        sp: words.at(22),
        fp: Some(outer),
    });
    let stack = words.stack(4);
    assert_eq!(native_caller(&table, &stack, &at(record))[0], expected);
    // rbp used as a general register by libc: the record is found above sp.
    assert_eq!(native_caller(&table, &stack, &at(12345))[0], expected);
    // Returning into a framed stub (a C1 runtime stub): its caller, through its rbp.
    words.0[21] = stub.pc(16);
    words.0[41] = 0x40200;
    words.0[40] = words.at(60);
    assert_eq!(
        native_caller(&table, &stack, &at(record))[0].map(|r| r.pc),
        Some(0x40200)
    );
    // A chain through anything but libjvm is no chain.
    words.0[11] = 0x30500;
    assert_eq!(native_caller(&table, &stack, &at(record))[0], None);
}

#[test]
fn adapters_resume_in_the_interpreted_or_the_compiled_caller() {
    let table = Table::new();
    table.set_interpreter(0x10000, 0x20000);
    table.add_stub(0x30000, 0x31000, StubKind::Adapter);
    table.note_code(0x40000, 0x50000); // nmethods
    let mut words = FakeStack::new();
    // I2C: rbp at word 40, its last_sp (word 38) = r13 = word 30, the interpreter's
    // return address just below r13.
    words.0[38] = words.at(30);
    words.0[29] = 0x10500;
    let i2c = Interrupted {
        pc: 0x30010,
        sp: words.at(24),
        fp: words.at(40),
        r13: words.at(30),
        rax: 0,
    };
    let expected = Resume {
        pc: 0x10500,
        sp: words.at(30),
        fp: Some(words.at(40)),
    };
    assert_eq!(adapter(&table, &words.stack(24), &i2c), Some(expected));
    // JDK 22+: last_sp in words relative to rbp.
    words.0[38] = (-10isize) as usize;
    assert_eq!(adapter(&table, &words.stack(24), &i2c), Some(expected));
    words.0[38] = 0;
    // C2I before it pops the return address: sp ≡ 8 (mod 16), the address at [sp].
    let base = words.at(0);
    let odd = if base % 16 == 8 { 0 } else { 1 };
    words.0[odd + 24] = 0x40100;
    let c2i = Interrupted {
        pc: 0x30080,
        sp: words.at(odd + 24),
        fp: 0,
        r13: 0,
        rax: 0,
    };
    assert_eq!(
        adapter(&table, &words.stack(odd + 24), &c2i),
        Some(Resume {
            pc: 0x40100,
            sp: words.at(odd + 25),
            fp: None
        })
    );
    // After: r13 the caller's sp, the address moved to [sp] (or still in rax).
    let even = odd + 1;
    words.0[even + 2] = 0x40200;
    let after = Interrupted {
        pc: 0x30090,
        sp: words.at(even + 2),
        fp: 0,
        r13: words.at(even + 6),
        rax: 0x40300,
    };
    let stack = words.stack(even + 2);
    assert_eq!(adapter(&table, &stack, &after).map(|r| r.pc), Some(0x40200));
    words.0[even + 2] = 0x1234;
    assert_eq!(adapter(&table, &stack, &after).map(|r| r.pc), Some(0x40300));
    assert_eq!(
        adapter(&table, &stack, &after).map(|r| r.sp),
        Some(words.at(even + 6))
    );
}

/// The slot at each instruction of `code` at the given offsets.
fn slots(code: &[u8], at: &[usize]) -> Vec<Option<usize>> {
    let code = FakeCode::new(code);
    at.iter()
        .map(|&i| prologue_epilogue_slot(&Code::at(code.pc(i))))
        .collect()
}

/// Whether `pc(i)` is in a frameless entry, for each offset of `code`.
fn frameless(code: &[u8], at: &[usize]) -> Vec<bool> {
    let code = FakeCode::new(code);
    at.iter()
        .map(|&i| Code::at(code.pc(i)).in_frameless_entry())
        .collect()
}

#[test]
fn inline_cache_checks_and_hash_code_fast_paths_are_frameless() {
    // JDK 17: mov r10d, [rsi+8]; mov r11, base; add r10, r11; cmp rax, r10; jne miss; a
    // nop; then the verified entry's stack bang.
    let jdk17 = [
        0x44, 0x8b, 0x56, 0x08, 0x49, 0xbb, 0x00, 0x00, 0x00, 0x6b, 0x13, 0x7f, 0x00, 0x00, 0x4d,
        0x03, 0xd3, 0x49, 0x3b, 0xc2, 0x0f, 0x85, 0xc6, 0xb2, 0xa6, 0xff, 0x66, 0x90, 0x89, 0x84,
        0x24, 0x00, 0xc0, 0xfe, 0xff,
    ];
    assert_eq!(
        frameless(&jdk17, &[0, 17, 20, 26, 28]),
        [true, true, true, true, false]
    );
    // JDK 11 (Jetty): mov r10d, [rsi+8]; mov r12, base; add r10, r12; xor r12, r12;
    // cmp rax, r10; jne miss; nops (3 and 8 bytes); then the verified entry's stack bang.
    let jdk11 = [
        0x44, 0x8b, 0x56, 0x08, 0x49, 0xbc, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x4d,
        0x03, 0xd4, 0x4d, 0x33, 0xe4, 0x4c, 0x3b, 0xd0, 0x0f, 0x85, 0xe3, 0xee, 0x90, 0xff, 0x66,
        0x66, 0x90, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x89, 0x84, 0x24, 0x00, 0xc0,
        0xfe, 0xff,
    ];
    assert_eq!(
        frameless(&jdk11, &[4, 17, 20, 23, 29, 32, 40]),
        [true, true, true, true, true, true, false]
    );
    // JDK 25: mov r10d, [rsi+8]; cmp r10d, [rax+8]; jne miss; then a stack bang.
    let jdk25 = [
        0x44, 0x8b, 0x56, 0x08, 0x44, 0x3b, 0x50, 0x08, 0x0f, 0x85, 0xc0, 0x4c, 0x2d, 0x07, 0x89,
        0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff,
    ];
    assert_eq!(frameless(&jdk25, &[0, 4, 8, 14]), [true, true, true, false]);
    // JDK 17's identityHashCode: null check, mov rax, [rsi]; test rax, 1; je slow;
    // shr rax, 8; and rax, mask; je slow; ret; then the slow path.
    let hash17 = [
        0x48, 0x83, 0xfe, 0x00, 0x0f, 0x85, 0x04, 0x00, 0x00, 0x00, 0x48, 0x33, 0xc0, 0xc3, 0x48,
        0x8b, 0x06, 0x48, 0xf7, 0xc0, 0x01, 0x00, 0x00, 0x00, 0x0f, 0x84, 0x12, 0x00, 0x00, 0x00,
        0x48, 0xc1, 0xe8, 0x08, 0x48, 0x81, 0xe0, 0xff, 0xff, 0xff, 0x7f, 0x0f, 0x84, 0x01, 0x00,
        0x00, 0x00, 0xc3, 0x55,
    ];
    assert_eq!(
        frameless(&hash17, &[0, 17, 41, 47, 48]),
        [true, true, true, true, false]
    );
    // JDK 25: … mov rax, [rsi]; test al, 2; jne slow; shr rax, 11; and rax, mask; je; ret
    let hash25 = [
        0x48, 0x83, 0xfe, 0x00, 0x0f, 0x85, 0x04, 0x00, 0x00, 0x00, 0x48, 0x33, 0xc0, 0xc3, 0x48,
        0x8b, 0x06, 0xa8, 0x02, 0x0f, 0x85, 0x0d, 0x00, 0x00, 0x00, 0x48, 0xc1, 0xe8, 0x0b, 0x48,
        0x25, 0xff, 0xff, 0xff, 0x7f, 0x0f, 0x84, 0x01, 0x00, 0x00, 0x00, 0xc3, 0x55,
    ];
    assert_eq!(frameless(&hash25, &[17, 41, 42]), [true, true, false]);
}

#[test]
fn prologue_and_epilogue_patterns() {
    // mov [rsp-0x14000], eax; push rbp; sub rsp, 0x30; cmp [r15+0x20], 1; mov eax, ecx
    let prologue = [
        0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x30, 0x41, 0x81, 0x7f,
        0x20, 0x01, 0x00, 0x00, 0x00, 0x89, 0xc8,
    ];
    assert_eq!(
        slots(&prologue, &[0, 7, 8, 12, 20]),
        [Some(0), Some(0), Some(8), Some(0x38), None]
    );
    // add rsp, 0x30; pop rbp; cmp rsp, [r15+0x28]; ja +0x10; ret
    let epilogue = [
        0x48, 0x83, 0xc4, 0x30, 0x5d, 0x49, 0x3b, 0x67, 0x28, 0x0f, 0x87, 0x10, 0x00, 0x00, 0x00,
        0xc3,
    ];
    assert_eq!(
        slots(&epilogue, &[0, 4, 5, 9, 15]),
        [None, Some(8), Some(0), Some(0), Some(0)]
    );
    // Without bang: sub rsp, 0x18; mov [rsp+0x10], rbp; mov eax, edx
    let small = [
        0x66, 0x90, 0x48, 0x81, 0xec, 0x18, 0x00, 0x00, 0x00, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x8b,
        0xc2,
    ];
    assert_eq!(slots(&small, &[2, 9, 14]), [Some(0), Some(0x18), None]);
    // JDK 21: sub rsp, 0x18; mov [rsp+0x10], rbp; cmp [r15+0x20], 1; lea eax, [rdx+4]
    let barrier = [
        0x48, 0x81, 0xec, 0x18, 0x00, 0x00, 0x00, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x41, 0x81, 0x7f,
        0x20, 0x01, 0x00, 0x00, 0x00, 0x8d, 0x42, 0x04,
    ];
    assert_eq!(slots(&barrier, &[12, 20]), [Some(0x18), None]);
    // JDK 11: pop rbp; mov r10, [r15+0x108]; test [r10], eax; ret
    let jdk11 = [
        0x5d, 0x4d, 0x8b, 0x97, 0x08, 0x01, 0x00, 0x00, 0x41, 0x85, 0x02, 0xc3,
    ];
    assert_eq!(slots(&jdk11, &[1, 8, 11]), [Some(0), Some(0), Some(0)]);
    // JDK 11, C1: a loop's back-edge poll (after `cmp edx, 0; je`), inside the frame.
    let loop_poll = [
        0x83, 0xfa, 0x00, 0x0f, 0x84, 0xda, 0x00, 0x00, 0x00, 0x4d, 0x8b, 0x97, 0x08, 0x01, 0x00,
        0x00, 0x41, 0x85, 0x02,
    ];
    assert_eq!(slots(&loop_poll, &[9, 16]), [None, None]);
    // JDK 25, C2: push rbp; sub rsp, 0x30; cmp [r15+0x20], 2; jne slow
    let c2_barrier = [
        0x55, 0x48, 0x83, 0xec, 0x30, 0x41, 0x81, 0x7f, 0x20, 0x02, 0x00, 0x00, 0x00, 0x0f, 0x85,
        0xbe, 0x02, 0x00, 0x00,
    ];
    assert_eq!(slots(&c2_barrier, &[5, 13]), [Some(0x38), Some(0x38)]);
    // JDK 25, C1: push rbp; sub rsp, 0x40; cmp [r15+0x20], 3; je +5; call slow
    let c1_barrier = [
        0x55, 0x48, 0x83, 0xec, 0x40, 0x41, 0x81, 0x7f, 0x20, 0x03, 0x00, 0x00, 0x00, 0x74, 0x05,
        0xe8, 0x25, 0x38, 0x2a, 0x07,
    ];
    assert_eq!(slots(&c1_barrier, &[13, 15]), [Some(0x48), Some(0x48)]);
    // A lone push rbp or ret is not recognised.
    assert_eq!(slots(&[0x90, 0x55, 0x90, 0xc3], &[1, 3]), [None, None]);
}
