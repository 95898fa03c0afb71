// SPDX-License-Identifier: Apache-2.0
//! The afm-dev example backend in Rust: the same backend as example_backend.c, with only the standard library.
//!
//! It serves one model, "example-rust-hello", that answers every request with a fixed greeting, streamed word by
//! word from a thread of its own, and honours cancel(). The C types of afm_backend.h are written out below with
//! `#[repr(C)]` (the header is the contract; the sizes are checked at compile time against its ABI 1.0 sizes):
//!
//!   afm_backend_negotiate   the only exported symbol (a cdylib exports only `#[no_mangle] pub extern "C"` items)
//!   create / destroy        one instance per configuration; destroy cancels and joins running generations
//!   describe                the JSON document listing the model, its budgets and capabilities
//!   generate                returns at once; a thread emits TEXT_DELTA..., USAGE, then exactly one DONE
//!   cancel                  thread-safe and idempotent; the generation ends with AFM_FINISH_CANCELLED
//!
//! No panic crosses the C boundary: every entry point runs its body under `catch_unwind` and answers
//! AFM_ERR_INTERNAL instead.

use std::collections::HashMap;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

// ------------------------------------------------------------------------------------------------------------
// The ABI (afm_backend.h, ABI 1.1)
// ------------------------------------------------------------------------------------------------------------

const AFM_ABI_MAJOR: u32 = 1;
const AFM_ABI_MINOR: u32 = 1;
const AFM_OK: i32 = 0;
const AFM_ERR_INVALID_REQUEST: i32 = 1;
const AFM_ERR_MODEL_UNAVAILABLE: i32 = 2;
const AFM_ERR_BUSY: i32 = 11;
const AFM_ERR_INTERNAL: i32 = 13;
const AFM_ERR_INCOMPATIBLE: i32 = 14;
const AFM_LOG_INFO: i32 = 1;
const AFM_EVENT_TEXT_DELTA: i32 = 1;
const AFM_EVENT_USAGE: i32 = 7;
const AFM_EVENT_DONE: i32 = 100;
const AFM_FINISH_STOP: i32 = 0;
const AFM_FINISH_CANCELLED: i32 = 3;
const AFM_BACKEND_INFO_SIZE_1_0: u32 = 40;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct AfmStr {
    data: *const c_char,
    size: u64,
}

#[repr(C)]
pub struct AfmError {
    struct_size: u32,
    code: i32,
    message: [c_char; 512],
}

#[repr(C)]
pub struct AfmHostApi {
    struct_size: u32,
    abi_major: u32,
    abi_minor: u32,
    reserved0: u32,
    host_ctx: *mut c_void,
    log: Option<extern "C" fn(*mut c_void, i32, AfmStr)>,
    get_extension: Option<extern "C" fn(*mut c_void, *const c_char) -> *const c_void>,
}

#[repr(C)]
pub struct AfmEvent {
    struct_size: u32,
    event_type: i32,
    index: i32,
    code: i32,
    text: AfmStr,
    name: AfmStr,
    input_tokens: i64,
    output_tokens: i64,
    reasoning_tokens: i64,
    cached_tokens: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct AfmEventSink {
    struct_size: u32,
    reserved0: u32,
    ctx: *mut c_void,
    emit: Option<extern "C" fn(*mut c_void, *const AfmEvent) -> i32>,
}

#[repr(C)]
pub struct AfmWriter {
    struct_size: u32,
    reserved0: u32,
    ctx: *mut c_void,
    write: Option<extern "C" fn(*mut c_void, AfmStr)>,
}

#[repr(C)]
pub struct AfmBackendVtable {
    struct_size: u32,
    reserved0: u32,
    create: extern "C" fn(*const AfmHostApi, AfmStr, *mut *mut Instance, *mut AfmError) -> i32,
    describe: extern "C" fn(*mut Instance, *const AfmWriter, *mut AfmError) -> i32,
    generate: extern "C" fn(*mut Instance, u64, AfmStr, *const AfmEventSink, *mut AfmError) -> i32,
    cancel: extern "C" fn(*mut Instance, u64),
    destroy: extern "C" fn(*mut Instance),
    get_extension: extern "C" fn(*mut Instance, *const c_char) -> *const c_void,
}

#[repr(C)]
pub struct AfmBackendInfo {
    struct_size: u32,
    abi_major: u32,
    abi_minor: u32,
    reserved0: u32,
    id: *const c_char,
    version: *const c_char,
    vtable: *const AfmBackendVtable,
}

// The ABI 1.0 sizes on LP64 (docs/backend-abi.md §1): a wrong field here fails the build.
const _: () = assert!(std::mem::size_of::<AfmEvent>() == 80);
const _: () = assert!(std::mem::size_of::<AfmBackendVtable>() == 56);
const _: () = assert!(std::mem::size_of::<AfmBackendInfo>() == 40);
const _: () = assert!(std::mem::size_of::<AfmError>() == 520);

// ------------------------------------------------------------------------------------------------------------
// The backend
// ------------------------------------------------------------------------------------------------------------

const ID: &[u8] = b"example-rust\0";
const VERSION: &[u8] = b"1.0.0\0";
const MODEL: &str = "example-rust-hello";
const GREETING: [&str; 5] = ["Hello", " from", " the", " Rust", " example."];

/// One instance: its running generations (their cancel flags) and their threads.
pub struct Instance {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: HashMap<u64, Arc<AtomicBool>>,
    threads: Vec<JoinHandle<()>>,
}

/// The host's sink, moved to the generation's thread. The ABI lets any thread call `emit` as long as calls for
/// one generation never overlap, and keeps `ctx` valid until the terminal event has been emitted.
struct Sink(AfmEventSink);
unsafe impl Send for Sink {}

impl Sink {
    /// Emits one event; false means the host wants the generation to stop.
    fn emit(&self, event_type: i32, code: i32, text: &str, output_tokens: i64) -> bool {
        let usage = event_type == AFM_EVENT_USAGE;
        let event = AfmEvent {
            struct_size: std::mem::size_of::<AfmEvent>() as u32,
            event_type,
            index: 0,
            code,
            text: AfmStr { data: text.as_ptr() as *const c_char, size: text.len() as u64 },
            name: AfmStr { data: std::ptr::null(), size: 0 },
            input_tokens: if usage { 1 } else { -1 },
            output_tokens: if usage { output_tokens } else { -1 },
            reasoning_tokens: if usage { 0 } else { -1 },
            cached_tokens: if usage { 0 } else { -1 },
        };
        match self.0.emit {
            Some(emit) => emit(self.0.ctx, &event) == 0,
            None => false,
        }
    }
}

fn run_generation(sink: Sink, cancelled: Arc<AtomicBool>) {
    let mut finish = AFM_FINISH_STOP;
    let mut words = 0;
    for word in GREETING {
        if cancelled.load(Ordering::Acquire) || !sink.emit(AFM_EVENT_TEXT_DELTA, 0, word, 0) {
            finish = AFM_FINISH_CANCELLED;
            break;
        }
        words += 1;
    }
    sink.emit(AFM_EVENT_USAGE, 0, "", words);
    sink.emit(AFM_EVENT_DONE, finish, "", 0); // exactly one terminal event, then nothing more
}

/// The `struct_size` a C struct starts with, or None for NULL. Read on its own: the host's struct may be shorter
/// (or longer) than this library's, so no reference to the whole struct is made before its size is known.
fn struct_size<T>(pointer: *const T) -> Option<usize> {
    if pointer.is_null() {
        return None;
    }
    Some(unsafe { (pointer as *const u32).read() } as usize)
}

/// Fills the host's error struct (within its struct_size) and returns `code`.
fn fail(error: *mut AfmError, code: i32, message: &str) -> i32 {
    // Only the bytes the host's struct_size covers are touched, through raw pointers (a `&mut AfmError` would
    // claim all 520 bytes).
    let size = match struct_size(error) {
        Some(size) => size.min(std::mem::size_of::<AfmError>()),
        None => return code,
    };
    let message_offset = 8usize; // struct_size (4) and code (4) come first
    if size < message_offset {
        return code;
    }
    unsafe { std::ptr::addr_of_mut!((*error).code).write(code) };
    let capacity = size - message_offset;
    if capacity == 0 {
        return code;
    }
    let mut count = message.len().min(capacity - 1);
    while !message.is_char_boundary(count) {
        count -= 1; // never cut a UTF-8 character in half
    }
    unsafe {
        let base = std::ptr::addr_of_mut!((*error).message) as *mut u8;
        std::ptr::copy_nonoverlapping(message.as_ptr(), base, count);
        base.add(count).write(0);
    }
    code
}

/// The bytes of a borrowed span (valid for the call only).
fn bytes<'a>(span: AfmStr) -> Option<&'a [u8]> {
    if span.size == 0 {
        return Some(&[]);
    }
    if span.data.is_null() {
        return None;
    }
    Some(unsafe { std::slice::from_raw_parts(span.data as *const u8, span.size as usize) })
}

/// The number after `"request_version":` in the request, or None when there is none.
fn request_version(request: &str) -> Option<u64> {
    const KEY: &str = "\"request_version\":";
    let rest = request[request.find(KEY)? + KEY.len()..].trim_start();
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).take(7).collect();
    digits.parse().ok()
}

/// Runs an entry point's body; a panic becomes AFM_ERR_INTERNAL instead of unwinding into the host.
fn guarded(error: *mut AfmError, body: impl FnOnce() -> i32) -> i32 {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| fail(error, AFM_ERR_INTERNAL, "example-rust panicked"))
}

extern "C" fn example_create(host: *const AfmHostApi, config: AfmStr, out: *mut *mut Instance, error: *mut AfmError) -> i32 {
    guarded(error, || {
        if out.is_null() {
            return fail(error, AFM_ERR_INVALID_REQUEST, "create: out is NULL");
        }
        // The config document ({"config_version":1,...,"settings":{...}}); this example takes no settings.
        if bytes(config).is_none() {
            return fail(error, AFM_ERR_INVALID_REQUEST, "create: the config span is invalid");
        }
        let instance = Box::new(Instance { state: Mutex::new(State::default()) });
        unsafe { *out = Box::into_raw(instance) };
        // `log` ends at offset 32; read it (and host_ctx) only when the host's table reaches that far.
        if struct_size(host).unwrap_or(0) >= 32 {
            let (log, context) = unsafe { (std::ptr::addr_of!((*host).log).read(), std::ptr::addr_of!((*host).host_ctx).read()) };
            if let Some(log) = log {
                let line = "example-rust instance created";
                log(context, AFM_LOG_INFO, AfmStr { data: line.as_ptr() as *const c_char, size: line.len() as u64 });
            }
        }
        AFM_OK
    })
}

extern "C" fn example_describe(_instance: *mut Instance, writer: *const AfmWriter, error: *mut AfmError) -> i32 {
    guarded(error, || {
        // The size first: only a writer at least as large as ours may be read as one.
        let writer = match struct_size(writer) {
            Some(size) if size >= std::mem::size_of::<AfmWriter>() && unsafe { (*writer).write.is_some() } => unsafe { &*writer },
            _ => return fail(error, AFM_ERR_INVALID_REQUEST, "describe: bad writer"),
        };
        let document = format!(
            "{{\"describe_version\":1,\"backend\":\"example-rust\",\"version\":\"1.0.0\",\"available\":true,\
             \"reason\":null,\"reason_code\":null,\"models\":[{{\"id\":\"{MODEL}\",\"context_tokens\":4096,\
             \"max_input_tokens\":3072,\"max_output_tokens\":1024,\"capabilities\":{{\"streaming\":true,\
             \"tools\":false,\"vision\":false,\"reasoning\":false,\"reasoning_optional\":true}}}}]}}"
        );
        (writer.write.unwrap())(writer.ctx, AfmStr { data: document.as_ptr() as *const c_char, size: document.len() as u64 });
        AFM_OK
    })
}

extern "C" fn example_generate(
    instance: *mut Instance, request_id: u64, request: AfmStr, sink: *const AfmEventSink, error: *mut AfmError,
) -> i32 {
    guarded(error, || {
        let instance = match unsafe { instance.as_ref() } {
            Some(instance) => instance,
            None => return fail(error, AFM_ERR_INVALID_REQUEST, "generate: instance is NULL"),
        };
        // The size first: only a sink at least as large as ours may be read as one.
        let sink = match struct_size(sink) {
            Some(size) if size >= std::mem::size_of::<AfmEventSink>() && unsafe { (*sink).emit.is_some() } => unsafe { *sink },
            _ => return fail(error, AFM_ERR_INVALID_REQUEST, "generate: bad event sink"),
        };
        // A real backend parses the request document (§8.2) with a JSON library. This one reads two things: the
        // version (a reader refuses a version it does not know, §1) and that it asks for its model.
        let request = match bytes(request) {
            Some(request) => String::from_utf8_lossy(request).into_owned(),
            None => return fail(error, AFM_ERR_INVALID_REQUEST, "generate: the request span is invalid"),
        };
        match request_version(&request) {
            Some(1) => {}
            Some(version) => {
                let message = format!("example-rust reads request_version 1, not {version}");
                return fail(error, AFM_ERR_INCOMPATIBLE, &message);
            }
            None => return fail(error, AFM_ERR_INVALID_REQUEST, "the request has no request_version"),
        }
        if !request.contains(&format!("\"{MODEL}\"")) {
            return fail(error, AFM_ERR_MODEL_UNAVAILABLE, "example-rust serves only the model example-rust-hello");
        }
        let cancelled = Arc::new(AtomicBool::new(false));
        let mut state = instance.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.running.contains_key(&request_id) {
            return fail(error, AFM_ERR_INVALID_REQUEST, "request_id is already running");
        }
        // Joins the threads of generations that ended, so the list does not grow.
        let (ended, running): (Vec<_>, Vec<_>) = state.threads.drain(..).partition(|thread| thread.is_finished());
        state.threads = running;
        for thread in ended {
            let _ = thread.join();
        }
        // Registered before the thread starts, so a cancel that arrives at once finds it.
        state.running.insert(request_id, cancelled.clone());
        let sink = Sink(sink);
        let instance_address = instance as *const Instance as usize;
        let spawned = std::thread::Builder::new().name(format!("example-rust-{request_id}")).spawn(move || {
            run_generation(sink, cancelled);
            // The instance outlives this thread: destroy joins every thread before freeing it.
            let instance = unsafe { &*(instance_address as *const Instance) };
            instance.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).running.remove(&request_id);
        });
        match spawned {
            Ok(thread) => {
                state.threads.push(thread);
                AFM_OK // an error returned here means no event will ever be emitted for this request
            }
            Err(_) => {
                state.running.remove(&request_id);
                fail(error, AFM_ERR_BUSY, "cannot start a generation thread")
            }
        }
    })
}

extern "C" fn example_cancel(instance: *mut Instance, request_id: u64) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(instance) = unsafe { instance.as_ref() } {
            let state = instance.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(flag) = state.running.get(&request_id) {
                flag.store(true, Ordering::Release);
            }
        }
    }));
}

extern "C" fn example_destroy(instance: *mut Instance) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if instance.is_null() {
            return;
        }
        let threads = {
            let instance = unsafe { &*instance };
            let mut state = instance.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            for flag in state.running.values() {
                flag.store(true, Ordering::Release);
            }
            std::mem::take(&mut state.threads)
        };
        for thread in threads {
            let _ = thread.join(); // the lock is not held: a thread takes it to unregister itself
        }
        drop(unsafe { Box::from_raw(instance) });
    }));
}

extern "C" fn example_get_extension(_instance: *mut Instance, _id: *const c_char) -> *const c_void {
    std::ptr::null() // no optional features
}

static VTABLE: AfmBackendVtable = AfmBackendVtable {
    struct_size: std::mem::size_of::<AfmBackendVtable>() as u32,
    reserved0: 0,
    create: example_create,
    describe: example_describe,
    generate: example_generate,
    cancel: example_cancel,
    destroy: example_destroy,
    get_extension: example_get_extension,
};

/// The entry point: the only exported symbol.
#[no_mangle]
pub extern "C" fn afm_backend_negotiate(host: *const AfmHostApi, out: *mut AfmBackendInfo, error: *mut AfmError) -> i32 {
    guarded(error, || {
        // Each struct's size before any other field: the host's may be shorter (or longer) than this library's.
        // abi_major and abi_minor end at offset 12.
        if struct_size(host).unwrap_or(0) < 12 || struct_size(out).unwrap_or(0) < AFM_BACKEND_INFO_SIZE_1_0 as usize {
            return fail(error, AFM_ERR_INCOMPATIBLE, "example-rust: host or out missing or too small");
        }
        let (host_major, host_minor) =
            unsafe { (std::ptr::addr_of!((*host).abi_major).read(), std::ptr::addr_of!((*host).abi_minor).read()) };
        // The whole ABI 1.0 struct is there (checked above). Its struct_size is the host's: it stays as it is.
        let out = unsafe { &mut *out };
        out.abi_major = AFM_ABI_MAJOR;
        out.abi_minor = AFM_ABI_MINOR;
        out.reserved0 = 0;
        out.id = ID.as_ptr() as *const c_char;
        out.version = VERSION.as_ptr() as *const c_char;
        out.vtable = std::ptr::null();
        if host_major != AFM_ABI_MAJOR {
            let message = format!(
                "example-rust speaks AFM ABI {AFM_ABI_MAJOR}.{AFM_ABI_MINOR}; the host offered {host_major}.{host_minor}"
            );
            return fail(error, AFM_ERR_INCOMPATIBLE, &message);
        }
        out.vtable = &VTABLE;
        AFM_OK
    })
}
