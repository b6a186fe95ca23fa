; Inno Setup 6 script: SIMI Multi for Windows, installed per user (no administrator rights).
; Not compiled on the Linux machine it was written on: see packaging/README.md.
;
; Build (packaging/windows/build.ps1 does all of this):
;   pyinstaller packaging\windows\simi-windows.spec     -> dist\simi-multi\ (the bundle)
;   ISCC /DAppVersion=0.1.0 packaging\windows\simi-multi.iss
;                                                       -> dist\SIMI-Multi-0.1.0-setup.exe
; AppVersion comes from desktop\__init__.py (__version__, the one version source); build.ps1
; reads it there and passes it. Optional: /DAppNumericVersion=0.1.0.0 (the file-version
; resource; defaults to AppVersion, which must then be plain numbers), /DBundleDir=...,
; /DOutputDir=..., /DIconFile=... (paths are relative to this script's folder).
;
; What it does:
; - installs into %LOCALAPPDATA%\Programs\SIMI Multi ({userpf}), no UAC prompt;
; - Start-menu entry, optional desktop icon (a task, unticked by default), "Launch" at the end;
; - an upgrade replaces the bundle's files (the old _internal\ folder is removed first so no
;   stale library survives) and never touches the user's data;
; - the uninstaller removes the program and keeps the user's data in
;   %LOCALAPPDATA%\simi-multi (database, settings, logs, downloaded models: platformdirs'
;   user_data_dir("simi-multi", appauthor=False), see desktop\settings\paths.py) unless the
;   person ticks "Also remove my conversations and settings" (unticked by default), or runs
;   the uninstaller with /REMOVEUSERDATA. A silent uninstall (/SILENT, /VERYSILENT) keeps the
;   data unless /REMOVEUSERDATA is given too;
; - API keys live in the Windows Credential Locker (keyring's Windows backend, service
;   "simi-multi"), not in files: the uninstaller leaves them; Control Panel > Credential
;   Manager > Windows Credentials removes them.

; PREPROCVER is the preprocessor's (= Inno Setup's) version; EncodeVer's Build defaults to -1,
; so it is given as 0 for a plain "6.x.0 or newer" comparison.
#if PREPROCVER < EncodeVer(6, 3, 0, 0)
  #error Inno Setup 6.3 or newer is needed (x64compatible)
#endif
#ifndef AppVersion
  #error Pass the version: ISCC /DAppVersion=X.Y.Z (build.ps1 reads desktop\__init__.py)
#endif
#ifndef AppNumericVersion
  #define AppNumericVersion AppVersion
#endif
#ifndef BundleDir
  #define BundleDir "..\..\dist\simi-multi"
#endif
#ifndef OutputDir
  #define OutputDir "..\..\dist"
#endif
#ifndef IconFile
  #define IconFile "..\..\build\icons\simi-multi.ico"
#endif

#define AppName "SIMI Multi"
#define AppExe "simi-multi.exe"
; The data folder's name: desktop\settings\paths.py APP_DIR_NAME.
#define DataDirName "simi-multi"

[Setup]
; The AppId identifies the product across versions (upgrades, the uninstall entry): never
; change it. The doubled brace is Inno's escape for a literal "{".
AppId={{8A2D3256-D160-4135-A9E9-818777DE5BAA}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=SIMI Multi developers
AppCopyright=SIMI Multi developers, Apache License 2.0
VersionInfoVersion={#AppNumericVersion}
VersionInfoProductName={#AppName}
VersionInfoDescription={#AppName} Setup
; Per user: no administrator rights, no elevation dialog. {userpf} is
; %LOCALAPPDATA%\Programs; {autoprograms} and {autodesktop} below resolve to the user's own
; Start menu and desktop in this mode.
PrivilegesRequired=lowest
DefaultDirName={userpf}\{#AppName}
DisableProgramGroupPage=yes
DefaultGroupName={#AppName}
UsePreviousAppDir=yes
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
LicenseFile=..\..\LICENSE
OutputDir={#OutputDir}
OutputBaseFilename=SIMI-Multi-{#AppVersion}-setup
SetupIconFile={#IconFile}
UninstallDisplayIcon={app}\{#AppExe}
UninstallDisplayName={#AppName}
WizardStyle=modern
; The bundle is ~300 MiB, a third of it the GGUF model (which hardly compresses).
Compression=lzma2/max
SolidCompression=yes
; Close a running SIMI Multi (Restart Manager) before replacing its files.
CloseApplications=yes
RestartApplications=no

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[InstallDelete]
; An upgrade must not mix the old bundle's libraries with the new one's. Only the program
; folder: the user's data is elsewhere (%LOCALAPPDATA%\{#DataDirName}).
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; WorkingDir: "{app}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#StringChange(AppName, '&', '&&')}}"; Flags: nowait postinstall skipifsilent

[Code]
var
  RemoveUserData: Boolean;

function UserDataDir(): String;
begin
  Result := ExpandConstant('{localappdata}\{#DataDirName}');
end;

function HasParam(const Name: String): Boolean;
var
  I: Integer;
begin
  Result := False;
  for I := 1 to ParamCount do
    if CompareText(ParamStr(I), Name) = 0 then
    begin
      Result := True;
      Exit;
    end;
end;

{ A small dialog before anything is removed: what is kept and where, one checkbox (unticked),
  Continue / Cancel. Returns False when the person cancels the uninstall. }
function AskRemoveUserData(var Remove: Boolean): Boolean;
var
  Form: TSetupForm;
  Note: TNewStaticText;
  Box: TNewCheckBox;
  ContinueButton, CancelButton: TNewButton;
  Margin: Integer;
begin
  Remove := False;
#if PREPROCVER >= EncodeVer(6, 6, 0, 0)
  { 6.6.0 changed the signature: the size is given here and is read-only afterwards. The
    6.6 help says to pass ScaleX/ScaleY values; a later help page says the function scales
    them itself. If the dialog comes out too large at 150-200 % display scaling, pass the
    plain numbers 440 and 170. Everything below is laid out from Form.ClientWidth/Height. }
  Form := CreateCustomForm(ScaleX(440), ScaleY(170), False, False);
#else
  Form := CreateCustomForm;
  Form.ClientWidth := ScaleX(440);
  Form.ClientHeight := ScaleY(170);
#endif
  try
    Form.Caption := 'Uninstall {#AppName}';
    Margin := ScaleX(12);

    Note := TNewStaticText.Create(Form);
    Note.Parent := Form;
    Note.AutoSize := False;
    Note.WordWrap := True;
    Note.Left := Margin;
    Note.Top := ScaleY(12);
    Note.Width := Form.ClientWidth - 2 * Margin;
    Note.Height := ScaleY(76);
    Note.Caption :=
      'Your conversations, agents, statistics, settings and downloaded models are kept in ' +
      UserDataDir + ', so installing {#AppName} again finds them. ' +
      'API keys stay in Windows Credential Manager.';

    Box := TNewCheckBox.Create(Form);
    Box.Parent := Form;
    Box.Left := Margin;
    Box.Top := Note.Top + Note.Height + ScaleY(8);
    Box.Width := Form.ClientWidth - 2 * Margin;
    Box.Height := ScaleY(20);
    Box.Caption := 'Also remove my conversations and settings';
    Box.Checked := False;

    CancelButton := TNewButton.Create(Form);
    CancelButton.Parent := Form;
    CancelButton.Width := ScaleX(85);
    CancelButton.Height := ScaleY(25);
    CancelButton.Left := Form.ClientWidth - Margin - CancelButton.Width;
    CancelButton.Top := Form.ClientHeight - ScaleY(12) - CancelButton.Height;
    CancelButton.Caption := 'Cancel';
    CancelButton.ModalResult := mrCancel;
    CancelButton.Cancel := True;

    ContinueButton := TNewButton.Create(Form);
    ContinueButton.Parent := Form;
    ContinueButton.Width := CancelButton.Width;
    ContinueButton.Height := CancelButton.Height;
    ContinueButton.Left := CancelButton.Left - ScaleX(8) - ContinueButton.Width;
    ContinueButton.Top := CancelButton.Top;
    ContinueButton.Caption := '&Continue';
    ContinueButton.ModalResult := mrOk;
    ContinueButton.Default := True;

    Result := Form.ShowModal = mrOk;
    Remove := Result and Box.Checked;
  finally
    Form.Free;
  end;
end;

function InitializeUninstall(): Boolean;
begin
  Result := True;
  RemoveUserData := HasParam('/REMOVEUSERDATA');
  if (not UninstallSilent) and (not RemoveUserData) then
    Result := AskRemoveUserData(RemoveUserData);
end;

procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
begin
  if (CurUninstallStep = usPostUninstall) and RemoveUserData and DirExists(UserDataDir) then
    if not DelTree(UserDataDir, True, True, True) then
      SuppressibleMsgBox('Some files in ' + UserDataDir + ' could not be removed ' +
        '(is SIMI Multi still running?). You can delete the folder yourself.',
        mbError, MB_OK, IDOK);
end;
