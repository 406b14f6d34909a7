fn main() {
    let path = std::env::args().nth(1).unwrap();
    let kind = std::env::args().nth(2).unwrap();
    let s = std::fs::read_to_string(path).unwrap();
    let r = match kind.as_str() {
        "guild" => serde_json::from_str::<twilight_model::guild::Guild>(&s).map(|_| ()),
        "message" => serde_json::from_str::<twilight_model::channel::Message>(&s).map(|_| ()),
        "ready" => serde_json::from_str::<twilight_model::gateway::payload::incoming::Ready>(&s).map(|_| ()),
        "channel" => serde_json::from_str::<twilight_model::channel::Channel>(&s).map(|_| ()),
        _ => panic!(),
    };
    println!("{r:?}");
}
