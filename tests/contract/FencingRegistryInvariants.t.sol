// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IFencingRegistry} from "../../contracts/IFencingRegistry.sol";
import {RegistryHandler} from "./RegistryHandler.sol";
import {Test} from "./support/Test.sol";

/**
 * @dev The registry's invariants, checked by forge's invariant fuzzer after every call of every run: the
 * fuzzer calls only {RegistryHandler}, which drives every external entry point of the registry as four
 * actors and moves time around leases' expiries (see its comment). One invariant function checks them
 * all: forge runs a campaign per invariant function, and five campaigns of the same calls would cost
 * five times one. Runs and depth are in foundry.toml; scripts/forge_invariants.sh runs it (`--deep`:
 * many more runs, a new seed), tests/contract/test_forge_invariants.py runs it in the suite.
 */
contract FencingRegistryInvariants is Test {
    /// @dev The registry function `selector` went through no call of the handler's.
    error NeverWentThrough(bytes4 selector);

    RegistryHandler internal handler;

    function setUp() public {
        handler = new RegistryHandler();
        targetContract(address(handler));
        targetSelector(FuzzSelector({addr: address(handler), selectors: handler.selectors()}));
    }

    function invariant_registry() public view {
        _checkAll();
    }

    /// @dev The handler is not vacuous: a fixed sequence of 3,000 handler calls (seeded, as the fuzzer's
    /// would be) makes every registry entry point go through at least once, ends leases in each of the
    /// three rightful ways, has strangers' admin calls refused, and breaks no invariant.
    function test_everyPathIsReached() public {
        bytes4[] memory entries = handler.selectors();
        for (uint256 i; i < 3000; ++i) {
            uint256 s = uint256(keccak256(abi.encode("driver", i)));
            bytes memory args;
            for (uint256 k; k < 6; ++k) {
                args = bytes.concat(args, keccak256(abi.encode(s, k)));
            }
            (bool ok,) = address(handler).call(bytes.concat(entries[s % entries.length], args));
            require(ok, "a handler call reverted");
        }
        _checkAll();
        bytes4[20] memory entryPoints = [
            IFencingRegistry.acquire.selector,
            IFencingRegistry.acquireExclusive.selector,
            IFencingRegistry.acquireMany.selector,
            IFencingRegistry.claimNext.selector,
            IFencingRegistry.batchCalls.selector,
            IFencingRegistry.renew.selector,
            IFencingRegistry.renewWithProgress.selector,
            IFencingRegistry.renewMany.selector,
            IFencingRegistry.release.selector,
            IFencingRegistry.releaseMany.selector,
            IFencingRegistry.complete.selector,
            IFencingRegistry.revoke.selector,
            IFencingRegistry.revokeItem.selector,
            IFencingRegistry.grant.selector,
            IFencingRegistry.grantItem.selector,
            IFencingRegistry.setNamespacePolicy.selector,
            IFencingRegistry.setAdmission.selector,
            IFencingRegistry.transferNamespaceAdmin.selector,
            IFencingRegistry.acceptNamespaceAdmin.selector,
            IFencingRegistry.performIntents.selector
        ];
        for (uint256 i; i < entryPoints.length; ++i) {
            if (handler.wentThrough(entryPoints[i]) == 0) revert NeverWentThrough(entryPoints[i]);
        }
        require(handler.endedByExpiry() > 0, "no lease expired");
        require(handler.endedByHolder() > 0, "no lease was ended by its holder");
        require(handler.endedByAdmin() > 0, "no lease was ended by its namespace's admin");
        require(handler.strangersRefused() > 0, "no stranger's admin call was refused");
        require(handler.hostileIntents() > 0, "no hostile intent was sent");
        require(handler.intentsLanded() > 0, "no intent landed");
    }

    /// @dev Revert, naming every invariant broken (each with its first finding), if any is. The handler checks,
    /// after every call (RegistryHandler._settle):
    /// - tokens strictly increase: each acquisition (acquire, acquireExclusive, acquireMany, a batch's,
    ///   claimNext, grant, grantItem) gets the previous token + 1, no token twice, and the registry's latest
    ///   token is the number of acquisitions that went through (it moves for nothing else);
    /// - at most one current holder per resource: one current token at most, the live lease's holder is the
    ///   account its token was issued to (leaseOf, isCurrent and checkCurrent agree), and a live lease ends
    ///   before its expiry only by its holder's call or its namespace admin's revoke or grant;
    /// - an ended lease's token (released, revoked, completed, superseded or expired) never becomes current
    ///   again, and no operation goes through with it;
    /// - no stranger acts on a namespace it does not administer: every admin call that went through (policy,
    ///   admission, hand-over, accept, revoke, grant) was its namespace's admin's (or the offered account's),
    ///   its admin's calls are not refused, and each namespace's admin, pending admin, policy and allowlist
    ///   are exactly what those calls set;
    /// - policies and work items hold: a namespace's admission and maxTtl bind every lease in it, its
    ///   lock-delay every taking of an expired lease, a completed work item stays done, a lease lives ttl s.
    function _checkAll() internal view {
        string memory found = handler.broken();
        require(bytes(found).length == 0, found);
    }
}
