//! A lease: what something a credential opened waits on, to end the moment that credential is
//! revoked ([`super::principal`] says which credential cancels it when).
//!
//! Rules it enforces:
//! - A lease is a cancellation token: waiting on it costs nothing until it ends, and nothing polls.
//! - A child lease ends with its parent (a dashboard session with the remote token that logged it
//!   in), and can also end alone (log-out).

use tokio_util::sync::CancellationToken;

/// Cancelled when the credential that opened something is revoked (see the module's rules).
/// Carried in a request's extensions by the check that proved the credential.
#[derive(Debug, Clone, Default)]
pub struct Lease(pub CancellationToken);

impl Lease {
    /// A lease that lasts the hub's run (a credential that cannot be revoked while it runs).
    pub fn for_the_run() -> Self {
        Self(CancellationToken::new())
    }

    /// A lease that has ended already.
    pub fn ended() -> Self {
        let token = CancellationToken::new();
        token.cancel();
        Self(token)
    }

    /// Whether the credential was revoked.
    pub fn is_ended(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Resolves once the credential is revoked.
    pub async fn end(&self) {
        self.0.cancelled().await;
    }

    /// Resolves once the credential is revoked (owning its lease: for a stream's state).
    pub fn end_owned(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.0.clone().cancelled_owned()
    }

    /// A lease that ends with this one, and can also be ended on its own.
    pub fn child(&self) -> Self {
        Self(self.0.child_token())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_child_lease_ends_with_its_parent_and_alone() {
        let parent = Lease::for_the_run();
        let (a, b) = (parent.child(), parent.child());
        a.0.cancel();
        assert!(a.is_ended() && !b.is_ended() && !parent.is_ended(), "a child ends alone");
        parent.0.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), b.end()).await.expect("the parent's end reaches its children");
        assert!(Lease::ended().is_ended());
    }
}
