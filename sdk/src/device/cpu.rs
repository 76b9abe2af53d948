//! The CPU backend: host memory, no streams worth the name and no events
//! (ARROW_DEVICE_CPU's event type is "N/A").

use std::sync::{Arc, OnceLock};

use super::{hostmem, Device, Event, Kind, MemoryKind, Stream};

/// Host memory. Allocation goes through the C allocator so that the
/// allocation tracker sees it like any producer's memory.
pub struct Cpu;

pub fn backend() -> Arc<dyn Device> {
    static CPU: OnceLock<Arc<dyn Device>> = OnceLock::new();
    CPU.get_or_init(|| Arc::new(Cpu)).clone()
}

const NO_EVENTS: &str = "ARROW_DEVICE_CPU has no event type";

impl Device for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
    fn alloc(&self, kind: Kind, len: usize) -> Result<usize, String> {
        if kind != Kind::Cpu {
            return Err(format!("the CPU backend cannot allocate {kind} memory"));
        }
        // SAFETY: malloc with any size is defined; a NULL result is handled.
        let p = unsafe { libc::malloc(len.max(1)) };
        if p.is_null() {
            return Err(format!("malloc({len}) failed"));
        }
        Ok(p as usize)
    }
    fn free(&self, addr: usize) -> Result<(), String> {
        // SAFETY: the trait's contract: `addr` came from `alloc` above.
        unsafe { libc::free(addr as *mut libc::c_void) };
        Ok(())
    }
    fn copy_to_host(&self, addr: usize, len: usize) -> Result<Vec<u8>, String> {
        hostmem::read(addr, len)
            .ok_or_else(|| format!("{len} bytes at {addr:#x} are not readable host memory"))
    }
    fn copy_from_host(&self, addr: usize, bytes: &[u8]) -> Result<(), String> {
        if !hostmem::readable(addr, bytes.len()) {
            return Err(format!("{addr:#x} is not host memory"));
        }
        // SAFETY: the range is mapped (checked above) and, by the trait's
        // contract, memory this backend allocated.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        Ok(())
    }
    fn stream_create(&self) -> Result<Stream, String> {
        Ok(Stream(0))
    }
    fn stream_destroy(&self, _: Stream) -> Result<(), String> {
        Ok(())
    }
    fn write_late(&self, _: Stream, addr: usize, bytes: &[u8]) -> Result<(), String> {
        self.copy_from_host(addr, bytes)
    }
    fn event_create(&self) -> Result<Event, String> {
        Err(NO_EVENTS.into())
    }
    fn event_destroy(&self, _: Event) -> Result<(), String> {
        Err(NO_EVENTS.into())
    }
    fn event_record(&self, _: Event, _: Stream) -> Result<(), String> {
        Err(NO_EVENTS.into())
    }
    fn event_wait(&self, _: Event) -> Result<(), String> {
        Err(NO_EVENTS.into())
    }
    fn event_query(&self, _: Event) -> Result<bool, String> {
        Err(NO_EVENTS.into())
    }
    fn event_behind(&self, _: usize) -> Result<Event, String> {
        Err(NO_EVENTS.into())
    }
    fn synchronize(&self) -> Result<(), String> {
        Ok(())
    }
    fn memory_kind(&self, addr: usize) -> Result<MemoryKind, String> {
        if hostmem::readable(addr, 1) {
            Ok(MemoryKind::Host)
        } else {
            Err(format!("{addr:#x} is not readable host memory"))
        }
    }
    fn allocation_of(&self, _: usize) -> Option<(usize, usize)> {
        None
    }
    fn live_bytes(&self) -> Option<i64> {
        None
    }
}
