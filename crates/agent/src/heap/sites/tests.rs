use super::*;

#[test]
fn sites_are_kept_apart_per_thread_when_asked() {
    let table = SiteTable::new();
    let class = table.intern("[B");
    table.keep_threads();
    let record = || table.record(class, &raw(&[1, 2]), 1.0, 8.0, None, || None);
    record();
    std::thread::scope(|s| {
        s.spawn(record);
    });
    let sites = table.snapshot();
    assert_eq!(sites.len(), 2, "{sites:?}");
    assert!(sites.iter().all(|s| s.key.thread.is_some()));
    let profile = to_profile(
        &sites,
        Part::Total,
        false,
        &HashMap::new(),
        Metadata::default(),
        |(m, _)| Frame::new(format!("m{m}"), FrameKind::Compiled),
    );
    for stack in profile.stacks() {
        let root = profile.frame(stack.0[0]);
        assert!(
            root.kind == FrameKind::Thread && root.name.contains("tid="),
            "{root:?}"
        );
    }
}

fn key(class: &str, frames: &[usize]) -> SiteKey {
    SiteKey {
        class: class.into(),
        thread: None,
        label: 0,
        frames: raw(frames).into(),
    }
}

fn raw(frames: &[usize]) -> Vec<RawFrame> {
    frames.iter().map(|&m| (m, 0)).collect()
}

fn name(frame: RawFrame) -> Frame {
    Frame::new(format!("m{}", frame.0), FrameKind::Compiled)
}

#[test]
fn sums_per_site_across_threads_and_tracks_live_objects() {
    let table = Arc::new(SiteTable::new());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let table = table.clone();
            std::thread::spawn(move || {
                let (bytes, string) = (table.intern("[B"), table.intern("Ljava/lang/String;"));
                for _ in 0..100 {
                    let tracked = table.reserve_id().map(by_id);
                    table.record(bytes, &raw(&[1, 2]), 2.0, 100.0, tracked, || None);
                    table.record(string, &raw(&[3]), 1.0, 24.0, None, || None);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(table.live_objects(), 400);
    for id in 1..=100 {
        table.freed(id);
    }
    table.freed(100_000); // unknown ids are ignored
    assert_eq!(table.live_objects(), 300);
    let mut sites = table.snapshot();
    sites.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(sites.len(), 2);
    let bytes = &sites[1];
    assert_eq!(&*bytes.key.class, "[B");
    assert_eq!(
        (bytes.total.samples, bytes.total.count, bytes.total.weight),
        (400, 800.0, 40_000.0)
    );
    assert_eq!(
        (bytes.live.samples, bytes.live.count, bytes.live.weight),
        (300, 600.0, 30_000.0)
    );
    assert_eq!(sites[0].live, Tally::default());

    let live = to_profile(
        &sites,
        Part::Live,
        false,
        &HashMap::new(),
        Metadata::default(),
        name,
    );
    assert_eq!(
        (
            live.stack_count(),
            live.total_samples(),
            live.total(jtap_profile::Counter::Events),
            live.total_weight()
        ),
        (1, 300, 600, 30_000),
        "samples taken, objects they stand for, bytes"
    );
    let stack = live.stacks()[0]
        .0
        .iter()
        .map(|&id| live.frame(id).name.clone())
        .collect::<Vec<_>>();
    assert_eq!(stack, ["m2", "m1", "byte[]"], "root first, class as leaf");
    let all = to_profile(
        &sites,
        Part::Total,
        false,
        &HashMap::new(),
        Metadata::default(),
        name,
    );
    assert_eq!((all.stack_count(), all.total_weight()), (2, 40_000 + 9_600));

    table.clear();
    assert!(table.snapshot().is_empty());
    assert_eq!(table.live_objects(), 0);
}

#[test]
fn sites_differ_by_class_and_every_frame_even_when_hashes_collide() {
    let table = SiteTable::new();
    let (a, b) = (table.intern("La;"), table.intern("Lb;"));
    assert_eq!(table.intern("La;"), a, "interning is stable");
    for frames in [&[1, 2][..], &[1, 3], &[1], &[]] {
        table.record(a, &raw(frames), 1.0, 8.0, None, || None);
        table.record(b, &raw(frames), 1.0, 8.0, None, || None);
    }
    table.record(a, &raw(&[1, 2]), 1.0, 8.0, None, || None);
    let mut sites = table.snapshot();
    sites.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(sites.len(), 8);
    assert_eq!(
        (
            &*sites[0].key.class,
            &*sites[0].key.frames,
            sites[0].total.samples
        ),
        ("La;", &[][..], 1)
    );
    let twice = sites
        .iter()
        .find(|s| &*s.key.class == "La;" && *s.key.frames == [(1, 0), (2, 0)])
        .unwrap();
    assert_eq!(twice.total.samples, 2);
    // Two keys in one bucket, as if their hashes had collided.
    let mut shard = lock(&table.shards[0]);
    let key = |class, frames: &[usize]| {
        Arc::new(Key {
            class,
            thread: 0,
            label: 0,
            frames: raw(frames).into(),
        })
    };
    shard.sites.insert(
        7,
        vec![
            (key(a, &[9]), Tally::default()),
            (key(b, &[9]), Tally::default()),
        ],
    );
    drop(shard);
    assert_eq!(table.snapshot().len(), 10);
}

#[test]
fn a_timeline_logs_each_sample_with_its_time_and_thread() {
    let table = SiteTable::new();
    let ints = table.intern("[I");
    table.record(ints, &raw(&[1]), 1.0, 16.0, None, || None); // before the timeline: counted only
    table.keep_timeline();
    table.record(ints, &raw(&[1]), 2.0, 32.0, None, || None);
    table.record(ints, &raw(&[2]), 1.0, 16.0, None, || None);
    let sites = table.snapshot();
    let profile = to_profile(
        &sites,
        Part::Total,
        true,
        &HashMap::new(),
        Metadata::default(),
        name,
    );
    assert_eq!(profile.total_samples(), 3);
    assert_eq!(profile.total_weight(), 64);
    let log = profile.logged();
    assert_eq!(log.len(), 2);
    assert_eq!(profile.metadata.unlogged, 1);
    assert!(log
        .iter()
        .all(|e| e.tid == current_tid() as u32 && e.time_ns > 0));
    assert_eq!(
        log.iter().map(|e| e.counts.weight).sum::<u64>(),
        48,
        "each logged sample keeps its own weight"
    );
    assert!(profile.thread_names().contains_key(&(current_tid() as u32)));
    table.clear();
    table.record(ints, &raw(&[1]), 1.0, 16.0, None, || None);
    assert!(
        table.snapshot()[0].events.is_empty(),
        "clear ends the timeline"
    );
}

#[test]
fn the_table_is_bounded() {
    let table = SiteTable::new();
    let ints = table.intern("[I");
    for i in 0..MAX_SITES + 10 {
        table.record(ints, &raw(&[i]), 1.0, 16.0, None, || None);
    }
    let tracked = table.reserve_id().map(by_id);
    table.record(ints, &raw(&[MAX_SITES + 20]), 1.0, 16.0, tracked, || None);
    assert_eq!(table.snapshot().len(), MAX_SITES);
    assert_eq!(table.dropped.load(Ordering::SeqCst), 11);
    assert_eq!(
        table.live_objects(),
        1,
        "a dropped site's object is still tracked"
    );
    table.freed(tracked.unwrap().id);
    assert_eq!(table.live_objects(), 0);
}

#[test]
fn sites_report_ranks_by_live_bytes_and_sums_every_site() {
    let tally = |count: f64, weight: f64| Tally {
        samples: 1,
        count,
        weight,
    };
    let sites = [
        Site {
            key: key("[B", &[1, 2, 3]),
            total: tally(10.0, 3000.0),
            live: Tally::default(),
            events: Vec::new(),
            survivors: Survivors::default(),
        },
        Site {
            key: key("Lworkloads/Sites$Kept;", &[4]),
            total: tally(5.0, 1000.0),
            live: tally(3.0, 750.0),
            events: Vec::new(),
            survivors: Survivors::default(),
        },
        Site {
            key: key("[J", &[5]),
            total: tally(1.0, 500.0),
            live: tally(1.0, 250.0),
            events: Vec::new(),
            survivors: Survivors::default(),
        },
    ];
    let recorded = Recording::Sampled {
        seconds: 1.0,
        interval: 1024,
    };
    let report = sites_report(&sites, recorded, None, (10, 2), name);
    let ranked: Vec<(u32, &str, usize)> = report
        .sites
        .iter()
        .map(|s| (s.rank, s.class.as_str(), s.frames.len()))
        .collect();
    assert_eq!(
        ranked,
        [
            (1, "workloads.Sites$Kept", 1),
            (2, "long[]", 1),
            (3, "byte[]", 2)
        ]
    );
    assert_eq!(report.sites[2].frames, ["m1", "m2"]);
    assert_eq!((report.live.bytes, report.live.objects), (1000.0, 4.0));
    assert_eq!(
        (report.allocated.bytes, report.allocated.objects),
        (4500.0, 16.0)
    );
    assert_eq!(report.site_count, 3);
    let first = sites_report(&sites, report.recorded.clone(), None, (1, 2), name);
    assert_eq!((first.sites.len(), first.site_count), (1, 3));
}

#[test]
fn leaks_rank_the_sites_whose_objects_survive_collections() {
    let table = SiteTable::new();
    table.rank_survivors(2);
    let (kept, churned) = (table.intern("Lapp/Kept;"), table.intern("[B"));
    let mut young: Vec<usize> = Vec::new();
    // Ten collections: each interval leaks one object and makes ten that die at the next,
    // found by a sweep of their weak references (here, fake ones: the id).
    for _ in 0..10 {
        let kept_object = table.reserve_id().map(|id| Tracked {
            id,
            weak: id as usize,
        });
        table.record(kept, &raw(&[1]), 1.0, 100.0, kept_object, || None);
        let mut gone = table.sweep(|weak| young.contains(&weak));
        gone.sort_unstable();
        assert_eq!(gone, young);
        young.clear();
        for _ in 0..10 {
            let id = table.reserve_id().unwrap();
            let churn = Tracked {
                id,
                weak: id as usize,
            };
            table.record(churned, &raw(&[2]), 1.0, 100.0, Some(churn), || None);
            young.push(id as usize);
        }
        table.collection_ended();
    }
    let sites = table.snapshot();
    let site = |class: &str| sites.iter().find(|s| &*s.key.class == class).unwrap();
    // Born after 0..=9 collections, now 10: those of ages 2 to 10 count.
    let survivors = site("Lapp/Kept;").survivors;
    assert_eq!((survivors.old.samples, survivors.old.weight), (9, 900.0));
    assert_eq!((survivors.born_in, survivors.oldest), (9, 10));
    // Old enough when born after 0..=8 collections: the later half is 5..=8.
    assert_eq!(survivors.later.weight, 400.0);
    // Those 9 intervals in 8 parts: the first holds two.
    let parts: Vec<f64> = survivors.by_birth[..survivors.parts as usize]
        .iter()
        .map(|t| t.weight)
        .collect();
    assert_eq!(
        parts,
        [200.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0]
    );
    // The churned site has more live bytes, none of them old.
    assert_eq!(site("[B").live.weight, 1000.0);
    assert_eq!(site("[B").survivors, Survivors::default());
    let recorded = Recording::Sampled {
        seconds: 1.0,
        interval: 100,
    };
    let leaks = Some(Leaks {
        min_age: 2,
        collections: table.collections(),
    });
    let report = sites_report(&sites, recorded.clone(), leaks, (10, 1), name);
    assert_eq!(report.sites.len(), 1, "{report:?}");
    assert_eq!(report.sites[0].class, "app.Kept");
    let listed = report.sites[0].survivors.clone().unwrap();
    assert_eq!(
        (
            listed.old.bytes,
            listed.born_in,
            listed.oldest,
            listed.later.bytes
        ),
        (900.0, 9, 10, 400.0)
    );
    assert_eq!(listed.by_birth.len(), 8);
    // Without leaks, the larger live site comes first.
    let plain = sites_report(&sites, recorded, None, (10, 1), name);
    assert_eq!(plain.sites[0].class, "byte[]");
    assert_eq!(plain.sites[0].survivors, None);
}

/// An object tracked by id alone.
fn by_id(id: i64) -> Tracked {
    Tracked { id, weak: 0 }
}

#[test]
fn untracking_hands_back_every_weak_reference_once() {
    let table = SiteTable::new();
    let ints = table.intern("[I");
    for weak in [0, 7, 9] {
        let tracked = table.reserve_id().map(|id| Tracked { id, weak });
        table.record(ints, &raw(&[1]), 1.0, 16.0, tracked, || None);
    }
    assert_eq!(table.sweep(|weak| weak == 7), [7]);
    assert_eq!(table.live_objects(), 2);
    assert_eq!(table.untrack_all(), [9]);
    assert_eq!(table.live_objects(), 0);
    assert!(table.untrack_all().is_empty());
}
