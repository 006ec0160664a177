// rust.rs — a hostile program for the agent: Rust's allocator (the system
// malloc, through the agent) used from 4 threads with Vecs, Strings, a
// HashMap and Box<[u8]>, growing and shrinking; prints checksums that depend
// only on the data.
use std::collections::HashMap;
use std::thread;

fn work(id: u64) -> u64 {
    let mut sum: u64 = 0;
    let mut keep: Vec<String> = Vec::new();
    let mut map: HashMap<u64, Vec<u64>> = HashMap::new();
    for i in 0..20000u64 {
        let s = format!("thread {} item {}", id, i);
        sum = sum.wrapping_add(s.len() as u64);
        if i % 3 == 0 {
            keep.push(s);
        }
        let v: Vec<u64> = (0..(i % 64)).collect();
        sum = sum.wrapping_add(v.iter().sum::<u64>());
        map.entry(i % 97).or_insert_with(Vec::new).extend_from_slice(&v[..v.len().min(4)]);
        if i % 1000 == 999 {
            keep.truncate(10);
            keep.shrink_to_fit();
            let b: Box<[u8]> = vec![id as u8; (i as usize) % 70000 + 1].into_boxed_slice();
            sum = sum.wrapping_add(b.len() as u64);
        }
    }
    for (k, v) in &map {
        sum = sum.wrapping_add(k * v.len() as u64);
    }
    sum
}

fn main() {
    let handles: Vec<_> = (0..4u64).map(|id| thread::spawn(move || work(id))).collect();
    let sums: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    println!("sums {:?}", sums);
}
