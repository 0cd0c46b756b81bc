// conformance suite against InMemorySaver
