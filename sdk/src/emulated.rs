//! A plugin's side of the emulated device (ARROW_DEVICE_EXT_DEV; see
//! `harness/include/arrowcert_emulated_device.h`): keeping the function
//! table the harness hands over, and the two things a producer and a
//! consumer do with it: put an exported array on the device, and wait on a
//! device array's `sync_event` before reading it.
//!
//! A plugin exports
//!
//! ```ignore
//! #[no_mangle]
//! pub unsafe extern "C" fn arrowcert_plugin_attach_emulated_device(
//!     t: *const ArrowcertEmulatedDevice) -> c_int { unsafe { sdk::emulated::attach(t) } }
//! ```
//!
//! and reads [`attached`] to know whether it has a device.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

use crate::abi::{ArrowArray, ArrowDeviceArray, ArrowSchema};
use crate::device::emulated_ffi::{ArrowcertEmulatedDevice, TABLE_VERSION};
use crate::device::mirror::{self, BufferRef, Placed};

static TABLE: AtomicPtr<ArrowcertEmulatedDevice> = AtomicPtr::new(std::ptr::null_mut());

/// Keeps the table `arrowcert_plugin_attach_emulated_device` was given.
/// Returns 0, or EINVAL for NULL or a table of another version.
///
/// # Safety
/// `table` is NULL or points to a table that stays valid for the life of
/// the process (the harness's is a static).
pub unsafe fn attach(table: *const ArrowcertEmulatedDevice) -> c_int {
    if table.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: non-NULL and valid (caller).
    if unsafe { (*table).abi_version } != TABLE_VERSION {
        return libc::EINVAL;
    }
    TABLE.store(table.cast_mut(), Ordering::Release);
    0
}

/// The attached device, if the harness gave one.
pub fn attached() -> Option<Emulated> {
    let p = TABLE.load(Ordering::Acquire);
    // SAFETY: only `attach` stores, and only tables valid for the life of
    // the process.
    (!p.is_null()).then(|| Emulated(unsafe { &*p }))
}

/// The emulated device, through its table. Handles are opaque pointers.
#[derive(Clone, Copy)]
pub struct Emulated(&'static ArrowcertEmulatedDevice);

/// An emulated stream or event handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub usize);

fn ok(rc: c_int, what: &str) -> Result<(), String> {
    match rc {
        0 => Ok(()),
        rc => Err(format!("emulated device: {what} failed ({rc})")),
    }
}

impl Emulated {
    /// The device id of emulated arrays.
    pub fn device_id(self) -> i64 {
        self.0.device_id
    }

    pub fn alloc(self, len: usize) -> Result<usize, String> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: the table's functions check their arguments; `p` is a
        // valid out pointer.
        ok(unsafe { (self.0.alloc)(len as i64, &mut p) }, "alloc")?;
        Ok(p as usize)
    }

    pub fn free(self, addr: usize) -> Result<(), String> {
        // SAFETY: as in `alloc`; the device checks the address.
        ok(unsafe { (self.0.free)(addr as *mut c_void) }, "free")
    }

    pub fn stream_create(self) -> Result<Handle, String> {
        let mut s: *mut c_void = std::ptr::null_mut();
        // SAFETY: as in `alloc`.
        ok(unsafe { (self.0.stream_create)(&mut s) }, "stream_create")?;
        Ok(Handle(s as usize))
    }

    /// Enqueues a write of `bytes` (copied now) to `dst` on `stream`.
    pub fn write_async(self, stream: Handle, dst: usize, bytes: &[u8]) -> Result<(), String> {
        // SAFETY: `bytes` is readable for its length during the call; the
        // device checks `dst` against its allocations.
        ok(
            unsafe {
                (self.0.write_async)(
                    stream.0 as *mut c_void,
                    dst as *mut c_void,
                    bytes.as_ptr().cast(),
                    bytes.len() as i64,
                )
            },
            "write_async",
        )
    }

    pub fn event_create(self) -> Result<Handle, String> {
        let mut e: *mut c_void = std::ptr::null_mut();
        // SAFETY: as in `alloc`.
        ok(unsafe { (self.0.event_create)(&mut e) }, "event_create")?;
        Ok(Handle(e as usize))
    }

    pub fn event_destroy(self, e: Handle) -> Result<(), String> {
        // SAFETY: the device checks the handle.
        ok(
            unsafe { (self.0.event_destroy)(e.0 as *mut c_void) },
            "event_destroy",
        )
    }

    pub fn event_record(self, e: Handle, stream: Handle) -> Result<(), String> {
        // SAFETY: the device checks both handles.
        ok(
            unsafe { (self.0.event_record)(e.0 as *mut c_void, stream.0 as *mut c_void) },
            "event_record",
        )
    }

    pub fn event_synchronize(self, e: Handle) -> Result<(), String> {
        // SAFETY: the device checks the handle.
        ok(
            unsafe { (self.0.event_synchronize)(e.0 as *mut c_void) },
            "event_synchronize",
        )
    }

    /// This plugin's stream (one per process, made on first use).
    pub fn own_stream(self) -> Result<Handle, String> {
        static STREAM: OnceLock<Result<Handle, String>> = OnceLock::new();
        STREAM.get_or_init(|| self.stream_create()).clone()
    }

    /// Waits on the event a device array's `sync_event` points to (nothing
    /// to wait for when it is NULL). "If this is non-null then it MUST be
    /// used to call the appropriate sync method for the device ... before
    /// attempting to access the memory in the buffers."
    ///
    /// # Safety
    /// `sync_event` is NULL or points to a readable event handle (the
    /// producer's contract for EXT_DEV arrays).
    pub unsafe fn wait_on(self, sync_event: *mut c_void) -> Result<(), String> {
        if sync_event.is_null() {
            return Ok(());
        }
        // SAFETY: points to an event handle (caller).
        let e = unsafe { *sync_event.cast::<*mut c_void>() };
        self.event_synchronize(Handle(e as usize))
    }

    /// Puts the host array `host` (described by `schema`) on the device:
    /// every buffer copied into a fresh allocation by a write enqueued on
    /// this plugin's stream, then an event recorded after the writes.
    /// Writes the device array into `out` (its `sync_event` points to the
    /// event, owned by the array and destroyed by its release), and
    /// releases `host`.
    ///
    /// # Safety
    /// `out` is valid for writes of one `ArrowDeviceArray`; `host` is a
    /// live array exported for `schema`, with host buffers.
    pub unsafe fn export(
        self,
        schema: &ArrowSchema,
        mut host: ArrowArray,
        out: *mut ArrowDeviceArray,
    ) -> Result<(), String> {
        let stream = self.own_stream()?;
        let mut read = |b: &BufferRef| {
            crate::device::hostmem::read(b.addr, b.len)
                .ok_or_else(|| format!("{} is not readable", b.at))
        };
        let mut place = |_: &BufferRef, bytes: Vec<u8>| -> Result<Placed, String> {
            let p = self.alloc(bytes.len())?;
            if let Err(e) = self.write_async(stream, p, &bytes) {
                let _ = self.free(p);
                return Err(e);
            }
            Ok(Placed {
                addr: p,
                free: Some(Box::new(move || {
                    let _ = self.free(p);
                })),
            })
        };
        let event = self.event_create()?;
        let slot = EventSlot {
            dev: self,
            slot: Box::new(event.0 as *mut c_void),
        };
        let sync_event = (&*slot.slot as *const *mut c_void)
            .cast_mut()
            .cast::<c_void>();
        let rebuilt = mirror::rebuild(schema, &host, &mut read, &mut place, Some(Box::new(slot)));
        if let Some(release) = host.release {
            // SAFETY: `host` is live (caller) and released once, here.
            unsafe { release(&mut host) };
        }
        let mut rebuilt = rebuilt.map_err(|e| e.to_string())?;
        self.event_record(event, stream)?;
        let array = crate::abi::ops::take(&mut rebuilt.array);
        // SAFETY: `out` is valid for writes (caller); zeroed first so that
        // padding and reserved bytes are zero.
        unsafe {
            std::ptr::write_bytes(out, 0, 1);
            (&raw mut (*out).array).write(array);
            (&raw mut (*out).device_type).write(crate::abi::device::EXT_DEV);
            (&raw mut (*out).device_id).write(self.device_id());
            (&raw mut (*out).sync_event).write(sync_event);
        }
        Ok(())
    }
}

/// The host slot `sync_event` points to; destroys the event with the array.
struct EventSlot {
    dev: Emulated,
    slot: Box<*mut c_void>,
}

// SAFETY: the slot holds an opaque handle; the device's functions may be
// called from any thread.
unsafe impl Send for EventSlot {}

impl Drop for EventSlot {
    fn drop(&mut self) {
        let _ = self.dev.event_destroy(Handle(*self.slot as usize));
    }
}
