fn main() {
    let a: Vec<String> = std::env::args().collect();
    let seed: u64 = a[1].parse().unwrap();
    let i: u64 = a[2].parse().unwrap();
    let b: usize = a[3].parse().unwrap();
    let s = arrowcert::gen::scenario(seed, &format!("gen/{i}")).unwrap();
    println!("{}", arrowcert::gen::describe(&s));
    println!("{:?}", s.slices);
    println!("{:?}", s.batches[b].column(0).to_data());
}
