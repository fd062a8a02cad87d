//! Reads the controller's `/metrics` (Prometheus text format) into numbers.

/// One scrape of `/metrics`.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    samples: Vec<Sample>,
}

#[derive(Clone, Debug, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

impl Scrape {
    pub fn parse(text: &str) -> Self {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(parse_line)
            .collect();
        Self { samples }
    }

    /// The value of the series `name` with exactly `labels`; 0 when absent
    /// (a counter that never moved is not exported yet).
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let mut series = self.matching(name, labels);
        series.find(|s| s.labels.len() == labels.len()).map_or(0.0, |s| s.value)
    }

    /// The sum over every series called `name`, whatever its labels.
    pub fn sum(&self, name: &str) -> f64 {
        self.sum_matching(name, &[])
    }

    /// The sum over the series called `name` whose labels include `labels`
    /// (others may be there too): e.g. the API server's
    /// `apiserver_request_total` for one verb and resource, whatever the code.
    pub fn sum_matching(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The series called `name` whose labels include `labels`.
    fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| {
            s.name == name
                && labels.iter().all(|(k, v)| s.labels.iter().any(|(sk, sv)| sk == k && sv == v))
        })
    }

    /// How many series it holds.
    pub fn series(&self) -> usize {
        self.samples.len()
    }

    /// The series called `name`, for messages.
    pub fn lines(&self, name: &str) -> String {
        let lines: Vec<String> = self
            .matching(name, &[])
            .map(|s| {
                let labels: Vec<String> =
                    s.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
                format!("{}{{{}}} {}", s.name, labels.join(","), s.value)
            })
            .collect();
        if lines.is_empty() { crate::tr!("no {name} series", name) } else { lines.join(", ") }
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        None => (series, Vec::new()),
        Some((name, rest)) => {
            let inner = rest.strip_suffix('}')?;
            let labels = inner
                .split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    Some((k.to_string(), v.trim_matches('"').to_string()))
                })
                .collect();
            (name, labels)
        }
    };
    Some(Sample { name: name.to_string(), labels, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use controller::metrics::{GIVE_UPS, RECONCILE_DURATION, RECONCILES, WRITES};

    #[test]
    fn reads_the_controllers_exposition() {
        let metrics = controller::metrics::Metrics::default();
        let took = Some(std::time::Duration::from_millis(1));
        metrics.reconciled(controller::metrics::ReconcileResult::unchanged, took);
        metrics.reconciled(controller::metrics::ReconcileResult::unchanged, took);
        metrics.reconciled(controller::metrics::ReconcileResult::created, took);
        metrics.wrote(controller::metrics::WriteVerb::create);
        let scrape = Scrape::parse(&metrics.encode());
        assert_eq!(scrape.get(RECONCILES, &[("result", "unchanged")]), 2.0);
        assert_eq!(scrape.sum(RECONCILES), 3.0);
        assert_eq!(scrape.get(WRITES, &[("verb", "create")]), 1.0);
        assert_eq!(scrape.get(WRITES, &[("verb", "update")]), 0.0);
        assert_eq!(scrape.sum(GIVE_UPS), 0.0);
        assert_eq!(scrape.sum(&format!("{RECONCILE_DURATION}_count")), 3.0);
        assert_eq!(scrape.sum_matching(RECONCILES, &[]), 3.0);
        assert_eq!(scrape.sum_matching(RECONCILES, &[("result", "created")]), 1.0);
    }
}
