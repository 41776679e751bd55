// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @dev The cheatcodes these tests use: a subset of forge's `Vm` interface, written here because
/// forge-std cannot be fetched (the suite runs without network). Signatures as forge 1.x defines them.
interface Vm {
    /// Sets `msg.sender` for the next call.
    function prank(address msgSender) external;
    /// Sets `block.timestamp`.
    function warp(uint256 newTimestamp) external;
    /// Deploys the artifact `artifactPath` ("File.sol:Contract") of this build with `constructorArgs`.
    function deployCode(string calldata artifactPath, bytes calldata constructorArgs) external returns (address);
    /// Names an address in traces.
    function label(address account, string calldata newLabel) external;
    /// The address of the key `privateKey`.
    function addr(uint256 privateKey) external pure returns (address);
    /// Signs `digest` with `privateKey` (ECDSA, low s; v 27 or 28).
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);
}

/// @dev The part of forge-std's `Test` and `StdInvariant` these tests use: the cheatcode address, and
/// the target lists forge reads from an invariant test contract after `setUp` (`targetContracts()`,
/// `targetSelectors()`; the names and return types are what forge looks for).
abstract contract Test {
    /// @dev A contract and the functions of it the invariant fuzzer may call.
    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// @dev forge's cheatcode address: `address(uint160(uint256(keccak256("hevm cheat code"))))`.
    Vm internal constant vm = Vm(0x7109709ECfa91a80626fF3989D68f67F5b1DD12D);

    bool public constant IS_TEST = true;

    address[] private _targetedContracts;
    FuzzSelector[] private _targetedSelectors;

    function targetContract(address target) internal {
        _targetedContracts.push(target);
    }

    function targetSelector(FuzzSelector memory selector) internal {
        _targetedSelectors.push(selector);
    }

    function targetContracts() public view returns (address[] memory) {
        return _targetedContracts;
    }

    function targetSelectors() public view returns (FuzzSelector[] memory) {
        return _targetedSelectors;
    }
}
