//! The vector search checks: run when the store has an index; expected
//! scores come from the store's own embedding function.

use serde_json::json;

use super::{fresh_namespace, CheckFailure, CheckResult};
use crate::store::{cosine_similarity, Filter, IndexChoice, Op, PutOp, SearchOp, Store, StoreExt};

const TEXTS: [(&str, &str); 4] = [
    ("rust", "rust ownership and borrowing"),
    ("python", "python generators and iterators"),
    ("cook", "a recipe for tomato soup"),
    ("mixed", "rust and python interop"),
];

async fn embed(store: &dyn Store, text: &str) -> Result<Vec<f32>, CheckFailure> {
    let index = store.index_config().ok_or_else(|| CheckFailure::new("no index"))?;
    index
        .embed
        .embed_query(text)
        .await
        .map_err(|e| CheckFailure::new(format!("the embedding function failed: {e}")))
}

async fn put_texts(store: &dyn Store, ns: &crate::store::Namespace) -> Result<(), CheckFailure> {
    let ops = TEXTS
        .iter()
        .map(|(k, t)| {
            Op::Put(
                PutOp::new(
                    ns.clone(),
                    *k,
                    json!({"text": t, "kind": if k.len() > 4 { "long" } else { "short" }}),
                )
                .index(IndexChoice::Paths(vec!["text".into()])),
            )
        })
        .collect();
    store.batch(ops).await?;
    Ok(())
}

pub async fn vector_search_orders_by_score(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    put_texts(store, &ns).await?;
    let found = store.search(SearchOp::new(ns).query("rust borrowing").limit(4)).await?;
    ensure_eq!(found.len(), 4, "every item");
    ensure_eq!(found[0].item.key, "rust", "the best match first");
    for pair in found.windows(2) {
        ensure!(
            pair[0].score >= pair[1].score,
            "scores not descending: {:?} then {:?}",
            pair[0].score,
            pair[1].score
        );
    }
    Ok(())
}

pub async fn vector_search_score_is_cosine(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    put_texts(store, &ns).await?;
    let query = "tomato soup for python";
    let q = embed(store, query).await?;
    let found = store.search(SearchOp::new(ns).query(query).limit(4)).await?;
    for s in &found {
        let text = s.item.value["text"].as_str().unwrap_or_default();
        let expected = cosine_similarity(&q, &embed(store, text).await?);
        let got = s
            .score
            .ok_or_else(|| CheckFailure::new(format!("{} has no score", s.item.key)))?;
        // f32 storage (sqlite-vec, pgvector) may round the last bits
        ensure!(
            (got - expected).abs() < 1e-5,
            "{}: score {got}, cosine {expected}",
            s.item.key
        );
    }
    Ok(())
}

pub async fn vector_search_item_ranks_by_best_vector(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    let value = json!({"texts": ["a recipe for tomato soup", "rust ownership and borrowing"]});
    store
        .batch(vec![
            Op::Put(PutOp::new(ns.clone(), "two", value).index(IndexChoice::Paths(vec!["texts[*]".into()]))),
            Op::Put(
                PutOp::new(ns.clone(), "one", json!({"text": "python generators"}))
                    .index(IndexChoice::Paths(vec!["text".into()])),
            ),
        ])
        .await?;
    let query = "rust ownership";
    let found = store.search(SearchOp::new(ns).query(query).limit(10)).await?;
    ensure_eq!(found.len(), 2, "an item with two vectors is found once");
    ensure_eq!(found[0].item.key, "two", "ranked by its best vector");
    let best = cosine_similarity(
        &embed(store, query).await?,
        &embed(store, "rust ownership and borrowing").await?,
    );
    let got = found[0].score.unwrap_or(f64::NAN);
    ensure!((got - best).abs() < 1e-5, "score {got}, best vector's cosine {best}");
    Ok(())
}

pub async fn vector_search_with_filter(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    put_texts(store, &ns).await?;
    let filter = Filter::new().eq("kind", "long");
    let found = store
        .search(SearchOp::new(ns).query("rust").filter(filter).limit(10))
        .await?;
    let mut keys: Vec<&str> = found.iter().map(|s| s.item.key.as_str()).collect();
    keys.sort_unstable();
    ensure_eq!(keys, ["mixed", "python"], "the filter applies to a vector search");
    Ok(())
}

pub async fn vector_search_index_off_keeps_no_vectors(store: &dyn Store) -> CheckResult {
    let ns = fresh_namespace(&[]);
    put_texts(store, &ns).await?;
    store
        .batch(vec![Op::Put(
            PutOp::new(ns.clone(), "plain", json!({"text": "rust ownership and borrowing"})).index(IndexChoice::Off),
        )])
        .await?;
    let found = store
        .search(SearchOp::new(ns).query("rust ownership").limit(10))
        .await?;
    let plain = found.iter().find(|s| s.item.key == "plain");
    ensure!(
        plain.is_none_or(|s| s.score.is_none()),
        "an item put with index off has a score: {plain:?}"
    );
    ensure!(
        found.first().is_some_and(|s| s.item.key == "rust"),
        "ranking: {found:?}"
    );
    Ok(())
}
