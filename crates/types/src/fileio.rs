//! Positional file I/O: reads and writes at an offset that leave the file's cursor alone, so that
//! several holders of one file (scratch files of vectors, rows files) can use it without a lock.

use std::fs::File;

/// Fills `buf` from `file` at `offset` (an error at the end of the file before `buf` is full).
#[cfg(unix)]
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Writes all of `buf` to `file` at `offset`.
#[cfg(unix)]
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

/// Fills `buf` from `file` at `offset` (an error at the end of the file before `buf` is full).
#[cfg(windows)]
pub fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// Writes all of `buf` to `file` at `offset`.
#[cfg(windows)]
pub fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => {
                buf = &buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes land at their offsets, reads read them back, and a read past the end is an error.
    #[test]
    fn positional_writes_and_reads_meet_at_their_offsets() {
        let path = std::env::temp_dir().join(format!("kgrag-fileio-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        write_all_at(&file, b"world", 6).unwrap();
        write_all_at(&file, b"hello ", 0).unwrap();
        let mut buf = [0u8; 5];
        read_exact_at(&file, &mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        read_exact_at(&file, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(read_exact_at(&file, &mut buf, 9).is_err());
        let _ = std::fs::remove_file(&path);
    }
}
